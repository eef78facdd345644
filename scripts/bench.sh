#!/usr/bin/env bash
# Split benchmark (make bench). Generates the shared benchmark CSV, then runs the reference Python
# splitter (../shared/bench/seed_splitter.py) and our split core (cmd/splitbench) on the same file
# in the same run, and prints one line per encoding:
#
#   split-csv-utf8: <MB/s> MB/s, peak <MB> MB; reference: <MB/s> MB/s; ratio <x>
#   split-csv-cp932: …
#   split-csv-utf8-skiprecord: <MB/s> MB/s, peak <MB> MB; failFile: <MB/s> MB/s; ratio <x>
#
#   pool-settings: <n> tenants, <MB> MB; start-up <ms> ms CPU, peak <MB> MB; lookup <µs> µs/key; reference …
#
#   admission: push N=1000, 50 slots, 10s files, 10 controllers: utilization <u> %; <v> invocations, …
#
# The admission lines are cmd/admissionbench: a burst of 1,000 and 10,000 waiting tenants
# (BENCH_ADMISSION_TENANTS) into one gate of 50 slots, the real internal/admission code and the
# controller's waiting and release path against dynalite on a scaled clock, beside the polling
# design it replaced (cmd/admissionbench/pollref) on the same input, with their ratios. Goals:
# utilization ≥ 95 %, ≤ 3 invocations and ≤ 10 read units per admitted file, read units within
# 1.2x between the sizes, the last first start within 1.1x of the ideal, a weight-5 tenant admitted
# ≥ 4x as often as a weight-1 tenant.
#
# The pool-settings line is cmd/poolbench: a pool function's settings load and key lookup at 100,000
# generated tenants (BENCH_POOL_TENANTS), beside the version 1 JSON load and linear scan measured
# in the same run; it needs nothing from ../shared. Goals: start-up ≤ 100 ms CPU, peak ≤ 48 MB,
# lookup ≤ 10 µs per key.
#
# The skiprecord line splits the UTF-8 file under onInvalidRecord skipRecord beside failFile, in the
# same run; goal: ratio ≥ 0.9 (skipping costs at most 10 %).
#
# Goals: ratio ≥ 15 for UTF-8, peak RSS ≤ 64 MB. BENCH_BIG=1 also splits a ~1 GB file to show that
# memory stays flat. BENCH_ROWS changes the row count (default 1,000,000). BENCH_STRICT=1 makes a
# missed goal fail the script. Generated files go to bench/out/ (gitignored) and are reused, since
# the generator is deterministic.
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${BENCH_ROWS:-1000000}
REF=${BENCH_REF_DIR:-../shared/bench}
OUT=bench/out
mkdir -p "$OUT"

go build -o "$OUT/splitbench" ./cmd/splitbench
go build -o "$OUT/poolbench" ./cmd/poolbench
go build -o "$OUT/admissionbench" ./cmd/admissionbench

have_ref=1
if [[ ! -f $REF/gen_csv.py || ! -f $REF/seed_splitter.py ]]; then
  have_ref=0
  echo "bench: $REF/gen_csv.py and seed_splitter.py are absent: no side-by-side comparison;" \
    "timing our split alone on a similar file from splitbench -gen" >&2
elif ! command -v python3 >/dev/null; then
  have_ref=0
  echo "bench: python3 is not installed: no side-by-side comparison" >&2
fi

# field NAME LINE prints the value of NAME=value in a "k=v k=v" line.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

generate() { # generate ENCODING FILE ROWS
  [[ -s $2 ]] && return
  if ((have_ref)); then
    python3 "$REF/gen_csv.py" "$3" "$2.tmp" --encoding "$1"
  else
    "$OUT/splitbench" -gen "$3" -encoding "$1" "$2.tmp"
  fi
  mv "$2.tmp" "$2"
}

# reference ENCODING FILE runs the unmodified seed splitter. It always decodes as utf-8-sig, so
# for the CP932 file it runs with io.TextIOWrapper's encoding forced to cp932; nothing else changes.
reference() {
  if [[ $1 == utf-8 ]]; then
    python3 "$REF/seed_splitter.py" "$2"
  else
    python3 - "$REF/seed_splitter.py" "$2" <<'PY'
import io, runpy, sys
wrapper = io.TextIOWrapper
io.TextIOWrapper = lambda buffer, encoding=None, **kw: wrapper(buffer, encoding="cp932", **kw)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
  fi
}

status=0
goal() { # goal MESSAGE: report a missed goal
  echo "bench: below goal: $1" >&2
  if [[ ${BENCH_STRICT:-0} == 1 ]]; then status=1; fi
}

for enc in utf-8 cp932; do
  name=${enc/-/}
  file=$OUT/bench-$ROWS-$enc$( ((have_ref)) || echo -go).csv
  generate "$enc" "$file" "$ROWS"
  ours=$("$OUT/splitbench" -encoding "$enc" "$file")
  mbps=$(field MBps "$ours")
  peak=$(field maxrss_MB "$ours")
  if ((have_ref)); then
    ref=$(field MBps "$(reference "$enc" "$file")")
    ratio=$(awk -v a="$mbps" -v b="$ref" 'BEGIN { printf "%.1f", a / b }')
    echo "split-csv-$name: $mbps MB/s, peak $peak MB; reference: $ref MB/s; ratio $ratio"
    if [[ $enc == utf-8 ]] && awk -v r="$ratio" 'BEGIN { exit !(r < 15) }'; then goal "utf-8 ratio $ratio < 15"; fi
  else
    echo "split-csv-$name: $mbps MB/s, peak $peak MB; reference: skipped (no $REF)"
  fi
  if awk -v p="$peak" 'BEGIN { exit !(p > 64) }'; then goal "$enc peak RSS $peak MB > 64 MB"; fi
done

file=$OUT/bench-$ROWS-utf-8$( ((have_ref)) || echo -go).csv
fail=$("$OUT/splitbench" -on-invalid failFile "$file")
skip=$("$OUT/splitbench" -on-invalid skipRecord "$file")
ratio=$(awk -v a="$(field MBps "$skip")" -v b="$(field MBps "$fail")" 'BEGIN { printf "%.2f", a / b }')
echo "split-csv-utf8-skiprecord: $(field MBps "$skip") MB/s, peak $(field maxrss_MB "$skip") MB; failFile: $(field MBps "$fail") MB/s; ratio $ratio"
if awk -v r="$ratio" 'BEGIN { exit !(r < 0.9) }'; then goal "skipRecord ratio $ratio < 0.9"; fi

if [[ ${BENCH_BIG:-0} == 1 ]]; then
  # ~8,000,000 rows ≈ 1 GB. splitbench -gen is much faster than gen_csv.py and the shape is the same.
  big=$OUT/bench-big-8000000-utf-8.csv
  if [[ ! -s $big ]]; then
    "$OUT/splitbench" -gen 8000000 "$big.tmp"
    mv "$big.tmp" "$big"
  fi
  ours=$("$OUT/splitbench" "$big")
  peak=$(field maxrss_MB "$ours")
  echo "split-csv-utf8-big: $(field MBps "$ours") MB/s, peak $peak MB; $(field bytes "$ours") bytes, $(field records "$ours") records, $(field chunks "$ours") chunks"
  if awk -v p="$peak" 'BEGIN { exit !(p > 64) }'; then goal "1 GB peak RSS $peak MB > 64 MB"; fi
fi
# poolbench prints its line, and says on stderr which goal it missed (exit 3 with -strict).
pool_rc=0
"$OUT/poolbench" -tenants "${BENCH_POOL_TENANTS:-100000}" -dir "$OUT" -strict || pool_rc=$?
if ((pool_rc == 3)); then
  if [[ ${BENCH_STRICT:-0} == 1 ]]; then status=1; fi
elif ((pool_rc != 0)); then
  status=1
fi
# admissionbench prints its lines, and says on stderr which goal the push design missed (exit 3
# with -strict).
adm_rc=0
"$OUT/admissionbench" -tenants "${BENCH_ADMISSION_TENANTS:-1000,10000}" -strict || adm_rc=$?
if ((adm_rc == 3)); then
  if [[ ${BENCH_STRICT:-0} == 1 ]]; then status=1; fi
elif ((adm_rc != 0)); then
  status=1
fi
exit $status
