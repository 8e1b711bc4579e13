"""Every threshold a verdict uses, in one place: the effect-size floor of a head score, the
significance level, the bootstrap's size and confidence, the specificity test's rival rule, the
units', SAEs' and weights' cut-offs, the unknown-token notice, and :class:`Thresholds` (routes,
circuits, exams, probes, the stop rule).

Other modules read these names; ``tests/unit/test_owners.py`` reads this module and fails when any
of its names is defined again elsewhere, or when another module binds a float constant at its top
level without saying there why it is not a threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ARENA's detector threshold: the effect-size floor of every score unless its entry says otherwise.
ARENA_FLOOR = 0.4

#: Default α and the null quantile that is τ (the post's rule: the 95th percentile).
ALPHA = 0.05
QUANTILE = 0.95

# -- bootstrap intervals (causal/shares.py over prompts, probing/ over held-out rows) --

#: Resamples per bootstrap interval, and the interval's confidence (percentile interval).
N_BOOT = 1000
CONFIDENCE = 0.95

# -- the specificity test (heads/specificity.py, heads/scorer.py, heads/discovery.py) --

#: The specificity test compares a score's key with its rivals and asks that it hold more than
#: RIVAL_RATIO times the attention of the strongest, query by query ("stands out"). The rivals are
#: every other key a query can attend to (RIVAL_WIDTH None: BOS excepted for a relative key) or,
#: with a width, the keys within that many positions of the score's key. Before issue 30 they
#: were the keys within 2 positions, each compared on its own, so a head split 50/50 between q-1
#: and q-4 was called previous-token. docs/statistics.md §1 and the sensitivity table
#: (experiments/cutoff_sensitivity.py) say why the strongest of every key, and why 2.
RIVAL_WIDTH: int | None = None
RIVAL_RATIO = 2.0
#: The fewest sign-flip draws (smallest p 1e-4); more when a report has more tests (draws_for).
MIN_DRAWS = 9999
#: A bootstrap resample's standard error is taken as at least this share of the sample's
#: (``heads/specificity.py: _studentized``; the boundary benchmark, docs/statistics.md §1, was
#: run with it).
SE_FLOOR = 0.5

# -- weights (weights/circuits.py) --

#: A head whose full OV circuit has ``ov_gain`` at or below this carries (almost) nothing of
#: the embedding to the logits: "empty". Random init of GPT-2 small gives about 1e-3.
EMPTY_OV_GAIN = 1e-6

# -- text (text/codecs.py: unknown_notice, read by the API and the CLI) --

#: The share of a user's text the vocabulary cannot represent above which a result on that text
#: carries a notice (the API's ``UnknownTokensWarning``, a line on the CLI's standard error).
UNKNOWN_NOTICE_SHARE = 0.1

# -- units (MLP neurons and SAE latents: units/reading.py, units/neurons.py, saes/roles.py) --

#: A monosemantic unit's concept holds at this share of its top-k positions, at least ...
MONO_SHARE = 0.8
#: ... and beats its base rate by a one-sided binomial test at this level ...
MONO_ALPHA = 0.01
#: ... and is specific: its share at the top is at least this many times its base rate.
MONO_LIFT = 10.0
#: Level of the one-sided test that one set of units has a larger monosemantic share.
BEATS_ALPHA = 0.01
#: Two token embeddings are "related" (the withdrawn polysemanticity count) above this quantile
#: of the cosine over random pairs; a token group counts when it holds this share of the weight.
SIM_QUANTILE = 0.99
MIN_SHARE = 0.1
#: A latent belongs to heads holding more than this share of its decoder row (and more than the
#: :data:`NULL_QUANTILE` of a random direction's share).
MAJORITY = 0.5
NULL_QUANTILE = 0.99
#: An induction latent has at least this share of its top positions in a repeat's second copy.
SECOND_COPY = 0.8
#: An SAE latent firing on at least this share of tokens is "dense" (saes/evaluate.py).
DENSE = 0.1


@dataclass(frozen=True)
class Thresholds:
    """Every threshold a study's sentences use.

    ``carries``: an input (Q, K or V) of an induction head carries its induction when resampling
    the earlier heads' writes into it from the corrupt prompts removes at least this share of the
    head's own effect (what resampling its output removes of the task's clean-corrupt gap; a
    model with several induction heads splits the gap among them), and the interval of that
    share lies above the control edge's.
    ``min_gap``: a model does the task (and has a route and a circuit to find) when its clean
    metric exceeds its corrupt metric by at least this much (nats of logit difference), with an
    interval above 0. ``recovers``: a circuit is the smallest set of edges whose faithfulness
    (the share of the gap it recovers alone) is at least this.
    ``exam_lower_bound``: a period exam passes when the lower bound of the Wilson 95% interval
    of its pass rate is at least this (:mod:`~interp_toolkit.exams.verdict`).
    ``chance_alpha``: an exam is above a measured chance level (another model on the same
    prompts) when its exact one-sided McNemar p-value is below this, Bonferroni-corrected over
    the exams. ``induction``: the effect-size floor a layer>=1 head's logged induction score
    (the one that decides the role) must pass for the run to count as having formed induction
    (the time to induction, the stop rule): the score registry's floor, read, not copied.
    ``decodable``: a feature is linearly decodable at a layer boundary when the lower end of the
    probe's held-out balanced accuracy's 95% interval is at least ``chance + decodable x (1 -
    chance)`` (:func:`~interp_toolkit.probing.probes.is_decodable`; 0.5: halfway from chance to
    perfect, so a binary feature needs 0.75).
    ``role_effect``: a head's role passes its causal check (:mod:`~interp_toolkit.exams.role_checks`)
    when ablating it removes at least this share of what the role is for (an induction head: the
    repeated-passage drop; a previous-token head, by its path: a later induction head's effect)
    and the interval of that share lies above 0.
    ``induction_effect``: the smallest difference in top-1 rate over all period exams (pooled,
    paired by prompt) that counts as induction: a model's exams as is against its order control
    (the first copy shuffled), and a 2-layer model against the 1-layer model; also the smallest
    1->2-layer rise that makes "a switch" (docs/study.md section 0). ``passage_effect``: the same
    for repeated held-out passages, in nats per token (the second copy's loss after a shuffled
    copy minus after the exact copy). ``min_seeds``: "reliably" is measured over at least this
    many seeds.
    """

    carries: float = 0.5
    min_gap: float = 1.0
    recovers: float = 0.8
    exam_lower_bound: float = 0.90
    chance_alpha: float = 0.05
    induction: float = ARENA_FLOOR  # every induction score's floor in the registry reads it too
    decodable: float = 0.5
    role_effect: float = 0.1
    induction_effect: float = 0.05
    passage_effect: float = 0.05
    min_seeds: int = 3


THRESHOLDS = Thresholds()

# -- the LLC's stages (development/stages.py; docs/stages.md, "The rule") --

#: The rule's smoothing width (natural-log steps) and its floor: a boundary's swings, as a share
#: of the smoothed curve's range.
BANDWIDTH = 0.25
MIN_SWING = 0.1
#: A stage's measure moved when it changed by at least this much (scores are in [0, 1]; losses in
#: nats): what a stage's description names.
MOVED = dict(loss=0.05, val_loss=0.05, previous_token=0.1, induction=0.1, passage_drop=0.1)
