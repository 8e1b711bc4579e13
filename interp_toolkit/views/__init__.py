"""Views: circuitsvis attention views (offline), plotly figures and self-contained HTML reports."""

from interp_toolkit.views.attention import (
    attention_heads_html,
    attention_patterns,
    attention_view,
    prompt_tokens,
    save_attention_view,
    token_labels,
    visible_token,
)
from interp_toolkit.views.plots import (
    attention_heatmap,
    exam_topk,
    head_impact_curves,
    head_score_heatmap,
    loss_curve,
)
from interp_toolkit.views.report import (
    Row,
    RunAnalysis,
    Section,
    analyse_run,
    build_run_report,
    describe_run,
    render_comparison,
    render_report,
    run_report_html,
)

__all__ = [
    "Row",
    "RunAnalysis",
    "Section",
    "analyse_run",
    "attention_heads_html",
    "attention_heatmap",
    "attention_patterns",
    "attention_view",
    "build_run_report",
    "describe_run",
    "exam_topk",
    "head_impact_curves",
    "head_score_heatmap",
    "loss_curve",
    "prompt_tokens",
    "render_comparison",
    "render_report",
    "run_report_html",
    "save_attention_view",
    "token_labels",
    "visible_token",
]
