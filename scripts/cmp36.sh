#!/usr/bin/env bash
# scripts/cmp36.sh NEW OLD: the speed work's output check (docs/testing.md): 36 small runs
# (9 workloads x 4 modes, --scale small --json) of two builds of `axle` compared byte for byte,
# every "commit" field (provenance) dropped. Exit 1 on a difference. Needs python3.
NEW=${1:?new binary}; OLD=${2:?old binary, e.g. a build of main kept before the change}
strip() { python3 -c 'import json,sys
def d(o):
    if isinstance(o,dict): return {k:d(v) for k,v in o.items() if k!="commit"}
    if isinstance(o,list): return [d(v) for v in o]
    return o
print(json.dumps(d(json.load(sys.stdin)),sort_keys=True))'; }
bad=0; n=0
for w in knn-a knn-b knn-c sssp pagerank ssb-q1.1 ssb-q1.2 dlrm opt-2.7b; do
  for m in rp bs axle axle-irq; do
    a=$("$OLD" run $w --mode $m --scale small --json 2>/dev/null | strip)
    b=$("$NEW" run $w --mode $m --scale small --json 2>/dev/null | strip)
    n=$((n+1))
    if [[ -z $a || $a != "$b" ]]; then echo "DIFF $w $m"; bad=1; fi
  done
done
echo "$n runs compared, $([[ $bad == 0 ]] && echo all identical || echo DIFFERENCES)"
exit $bad
