"""Exams: the post's single exams, the period exams, their verdict, and the text measures of induction as behaviour."""
