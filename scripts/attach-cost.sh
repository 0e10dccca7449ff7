#!/usr/bin/env bash
# What an attached run costs in wall time: each workload and mode run in-process and attached
# (`axle run W --mode M --attach SOCK` against one `axle emu --socket SOCK`), alternately, with
# microsecond timing; the attached JSON is checked byte for byte against the in-process one.
# Prints one row per workload and mode: the medians, and the ratio of the medians (the figure
# docs/emulator-process.md compares with 1.2), and the load average before and after.
#
#   scripts/attach-cost.sh [-b BIN] [-n RUNS] [-d DATA] [-w "W..."] [-m "M..."] [-o TSV] [-- RUN_ARGS...]
#
#   -b BIN   the axle binary (default target/release/axle)
#   -n RUNS  runs of each kind per workload and mode (default 5; odd gives a true median)
#   -d DATA  the data directory (--data; default ../shared/data if it exists)
#   -w, -m   the workloads and modes (default: all nine, all four)
#   -o TSV   also write every run: workload mode run in_s attached_s same load1
#   RUN_ARGS extra `axle run` arguments for both runs (e.g. --scale small)
#
# The order alternates (odd runs in-process first, even runs attached first), so that a
# machine whose load drifts during a pair weighs on both kinds alike. Exits 1 if any attached
# JSON differs from its in-process twin (or a run fails). Needs bash 5 ($EPOCHREALTIME).
set -euo pipefail
export LC_ALL=C # a decimal point in EPOCHREALTIME and in printf

BIN=target/release/axle
RUNS=5
DATA=
[[ -d ../shared/data ]] && DATA=../shared/data
WORKLOADS="knn-a knn-b knn-c sssp pagerank ssb-q1.1 ssb-q1.2 dlrm opt-2.7b"
MODES="rp bs axle axle-irq"
TSV=
while getopts "b:n:d:w:m:o:" option; do
    case $option in
        b) BIN=$OPTARG ;;
        n) RUNS=$OPTARG ;;
        d) DATA=$OPTARG ;;
        w) WORKLOADS=$OPTARG ;;
        m) MODES=$OPTARG ;;
        o) TSV=$OPTARG ;;
        *) sed -n '2,/^set /p' "$0" | sed '$d' >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
EXTRA=("$@")
[[ -n ${EPOCHREALTIME:-} ]] || { echo "attach-cost: needs bash 5 (\$EPOCHREALTIME)" >&2; exit 2; }
[[ -x $BIN ]] || { echo "attach-cost: no binary at $BIN (cargo build --release)" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "attach-cost: -n wants a positive count" >&2; exit 2; }
DATA_ARGS=()
[[ -n $DATA ]] && DATA_ARGS=(--data "$DATA")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/attach-cost.XXXXXX")
SOCK=$WORK/emu.sock
EMU=
cleanup() {
    if [[ -n $EMU ]]; then kill "$EMU" 2>/dev/null || true; wait "$EMU" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
"$BIN" emu --socket "$SOCK" 2>"$WORK/emu.log" &
EMU=$!
for _ in $(seq 100); do [[ -S $SOCK ]] && break; sleep 0.05; done
[[ -S $SOCK ]] || { echo "attach-cost: the emulator did not start:" >&2; cat "$WORK/emu.log" >&2; exit 2; }

# Microseconds since the epoch, from $EPOCHREALTIME (no process started to read the clock).
now_us() { local t=$EPOCHREALTIME; echo $(( ${t%.*} * 1000000 + 10#${t#*.} )); }

# One run; prints its wall time in microseconds; its JSON goes to $1.
run_one() {
    local out=$1; shift
    local t0 t1
    t0=$(now_us)
    if ! "$BIN" run "$@" --json "${DATA_ARGS[@]}" "${EXTRA[@]}" >"$out" 2>"$out.err"; then
        echo "attach-cost: failed: $BIN run $* --json ${DATA_ARGS[*]} ${EXTRA[*]}" >&2
        cat "$out.err" >&2
        return 1
    fi
    t1=$(now_us)
    echo $((t1 - t0))
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "# attach-cost: $BIN, $RUNS runs of each kind, alternating; data ${DATA:-built in}; ${EXTRA[*]:-paper scale}"
echo "# load average before: $(load) ($(nproc) CPUs)"
# The attached device memory is a shared memory file: it gets huge pages only where the kernel's
# shmem_enabled allows them without advice (`within_size`, `always`; docs/emulator-process.md).
SHMEM_THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
echo "# shared memory huge pages: $(grep -o '\[[a-z_]*\]' "$SHMEM_THP" 2>/dev/null || echo unknown) ($SHMEM_THP)"
# A guest whose memory balloon reports freed memory to its hypervisor pays the hypervisor's
# faults again on a process's fresh memory: the in-process DLRM run ranged 1.1 to 5.2 s with
# it, 1.4 s without (docs/emulator-process.md). Reporting covers free blocks of 2^order pages;
# an order above the kernel's largest (10 on x86) stops it.
REPORTING=/sys/module/page_reporting/parameters/page_reporting_order
[[ -r $REPORTING ]] && echo "# free page reporting to the hypervisor: order $(cat "$REPORTING") ($REPORTING)"
printf '%-10s %-9s %12s %12s %7s  %s\n' workload mode in-process attached ratio json
[[ -n $TSV ]] && : >"$TSV"
failed=0
above=0
pairs=0
for w in $WORKLOADS; do
    for m in $MODES; do
        : >"$WORK/in.us"
        : >"$WORK/at.us"
        same=same
        for r in $(seq "$RUNS"); do
            if (( r % 2 )); then
                a=$(run_one "$WORK/in.json" "$w" --mode "$m") || exit 1
                b=$(run_one "$WORK/at.json" "$w" --mode "$m" --attach "$SOCK") || exit 1
            else
                b=$(run_one "$WORK/at.json" "$w" --mode "$m" --attach "$SOCK") || exit 1
                a=$(run_one "$WORK/in.json" "$w" --mode "$m") || exit 1
            fi
            this=same
            cmp -s "$WORK/in.json" "$WORK/at.json" || { this=DIFF; same=DIFF; failed=1; }
            echo "$a" >>"$WORK/in.us"
            echo "$b" >>"$WORK/at.us"
            [[ -n $TSV ]] && printf '%s\t%s\t%s\t%.6f\t%.6f\t%s\t%s\n' "$w" "$m" "$r" \
                "$(awk -v x="$a" 'BEGIN { print x / 1e6 }')" "$(awk -v x="$b" 'BEGIN { print x / 1e6 }')" \
                "$this" "$(cut -d' ' -f1 /proc/loadavg)" >>"$TSV"
        done
        ia=$(median <"$WORK/in.us")
        ib=$(median <"$WORK/at.us")
        ratio=$(awk -v a="$ia" -v b="$ib" 'BEGIN { printf "%.2f", b / a }')
        pairs=$((pairs + 1))
        awk -v r="$ratio" 'BEGIN { exit !(r > 1.2) }' && above=$((above + 1))
        printf '%-10s %-9s %10.2f ms %10.2f ms %7s  %s\n' "$w" "$m" \
            "$(awk -v x="$ia" 'BEGIN { print x / 1000 }')" "$(awk -v x="$ib" 'BEGIN { print x / 1000 }')" \
            "$ratio" "$same"
    done
done
echo "# load average after: $(load)"
echo "# $above of $pairs pairs above 1.2 (ratio of the medians, attached / in-process)"
if (( failed )); then
    echo "attach-cost: an attached run printed other JSON than its in-process twin" >&2
    exit 1
fi
