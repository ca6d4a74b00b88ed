"""The canary judge: anytime-valid tests per metric (decide.py) over a stage's requests, read at every gate tick
without inflating the false-alarm rate, with the practical floor of config/rollout_judge.py (docs/rollout.md,
"Judge"). kayenta.py is the comparison the power study (bench/judge_power.py) runs beside it."""
