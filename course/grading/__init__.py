"""Course operations around a grade: when results show, the submission policy, the leaderboard,
grade export and regrades, and the similarity check (docs/grading.md, "Course operations").

``course.grading.grade`` grades; this package decides what of the grade a student sees and when
(``visibility``), what a submission's time does to it (``policy``), what goes on the
leaderboard (``leaderboard``), what the instructor exports (``export``) and which submissions
look copied (``similarity``). ``settings`` reads their tables of ``course/grading/rubric.toml``.
"""
