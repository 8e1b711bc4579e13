#!/usr/bin/env bash
# seeds soft at the floor: train past it, run heads at every kept 1000-step snapshot
cd "$(dirname "$0")/../../../.." || exit 1  # the repository root
B=.venv/bin/interp-toolkit
for spec in "0 13000 8000" "3 18000 14000" "2 20000 16000"; do
  set -- $spec; s=$1; n=$2; f=$3
  R=benchmarks/archive/results/text_seed0_past_floor/out/s$s
  date +%T; echo "train seed $s to $n"
  taskset -c 1 $B train --layers 2 --preset text --seed $s --steps $n --out $R --quiet || echo "train failed $s"
  for st in $(seq $f 1000 $n); do
    if [ $st -eq $n ]; then T=$R; else T=$R@$st; fi
    taskset -c 1 $B heads $T --json benchmarks/archive/results/text_seed0_past_floor/out/heads_s${s}_$st.json >/dev/null 2>benchmarks/archive/results/text_seed0_past_floor/out/heads_s${s}_$st.err || echo "heads failed $s $st"
  done
  date +%T
done
echo done
