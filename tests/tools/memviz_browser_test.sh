#!/usr/bin/env bash
# tools/memviz's page in a real browser (Debian's chromium, headless): it loads without a
# console message (the page has no script, so any message is an error), its DOM as the
# browser parsed it still holds each sim:0 category's chart area and legend row, and the
# rendered screenshot shows every legend swatch (12 x 12 pixels) and, for the categories
# training fills (parameter, optimizer, activation, gradient), their chart areas. tools/bootstrap.sh installs chromium; without it
# this test fails rather than pass unchecked.
set -euo pipefail
train="$1"
memviz="$2"
colours="$3"
snapshot="$4"  # gpt_snapshot.sh
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "memviz_browser_test: $*"; exit 1; }

browser=$(command -v chromium || true)
[[ -n "$browser" ]] || fail "chromium is not installed: run tools/bootstrap.sh"

"$snapshot" "$train" "$tmp" || fail "no snapshot"
"$memviz" --snapshot="$tmp/m.json" --out="$tmp/m.html" --top=3 || fail "memviz failed"
page="${MEMVIZ_PAGE:-$tmp/m.html}"  # another page, to check that this test can fail

# The browser sees a fresh profile in the test's own folder, no sandbox (tests may run as
# root) and no GPU; one page height holds both device sections.
run_browser() {
  HOME="$tmp" timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$tmp/profile" --force-device-scale-factor=1 --hide-scrollbars \
    --enable-logging=stderr --v=0 --window-size=1200,2000 "$@" "file://$page"
}
run_browser --screenshot="$tmp/shot.png" >"$tmp/shot.out" 2>"$tmp/shot.err" ||
  fail "chromium --screenshot failed: $(tail -5 "$tmp/shot.err")"
run_browser --dump-dom >"$tmp/dom.html" 2>"$tmp/dom.err" ||
  fail "chromium --dump-dom failed: $(tail -5 "$tmp/dom.err")"
if grep -hE "CONSOLE|Uncaught" "$tmp/shot.err" "$tmp/dom.err" >"$tmp/console.txt"; then
  fail "the page logged to the console: $(head -3 "$tmp/console.txt")"
fi

# The sim:0 section as the browser parsed it: category and colour of each chart area.
section=$(sed -n '/<section class="device" data-device="sim:0">/,/<\/section>/p' "$tmp/dom.html")
[[ -n "$section" ]] || fail "no sim:0 section in the parsed page"
mapfile -t areas < <(grep -o '<path class="area" data-category="[^"]*" fill="#[0-9a-f]*"' \
  <<<"$section" | sed -E 's/.*data-category="([^"]*)" fill="#([0-9a-f]*)"/\2 \1/')
(( ${#areas[@]} >= 4 )) || fail "the parsed sim:0 chart has ${#areas[@]} category areas"
hexes=()
for a in "${areas[@]}"; do hexes+=("${a%% *}"); done
counts=$(python3 "$colours" "$tmp/shot.png" "${hexes[@]}") || fail "cannot read the screenshot"
for a in "${areas[@]}"; do
  hex="${a%% *}"
  cat="${a#* }"
  grep -qF "<tr data-category=\"$cat\">" <<<"$section" || [[ "$cat" == freed* ]] ||
    fail "category $cat has no legend row in the parsed page"
  # Legend swatches of this colour on the whole page (each device has its own legend).
  swatches=$(grep -o "class=\"sw\" style=\"background:#$hex\"" "$tmp/dom.html" | wc -l)
  seen=$(awk -v h="$hex" '$1 == h { print $2 }' <<<"$counts")
  (( seen >= swatches * 144 )) ||
    fail "category $cat (#$hex): $seen pixels on screen, fewer than its $swatches legend swatch(es)"
  # What training holds fills the chart (hundreds of pixels at least); a small category
  # (input, other, freed blocks) may be a sliver thinner than a pixel.
  case "$cat" in
    parameter|optimizer|activation|gradient)
      (( seen > swatches * 144 + 500 )) ||
        fail "category $cat (#$hex): $seen pixels on screen, its chart area is not drawn" ;;
  esac
done
echo "memviz_browser_test: passed (${#areas[@]} sim:0 categories rendered by $("$browser" --version 2>/dev/null | head -1))"
