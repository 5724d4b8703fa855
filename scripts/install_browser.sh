#!/usr/bin/env bash
# The headless browser the HTML report tests use (tests/browser.py): Debian's chromium and chromium-driver.
# Run by `make browser` (CI runs it before `make test`; `make test` never does: without the browser those tests
# skip, saying how to install it). Does nothing when both are there; otherwise installs them with apt-get (as
# root). Where it cannot (not root, no apt-get, no network) it says so in one line and exits 1.
# KERNLINT_CHROMIUM / KERNLINT_CHROMEDRIVER point the tests and this script at other binaries.
set -euo pipefail

chromium=${KERNLINT_CHROMIUM:-/usr/bin/chromium}
driver=${KERNLINT_CHROMEDRIVER:-/usr/bin/chromedriver}

missing=()
[ -x "$chromium" ] || missing+=("$chromium")
[ -x "$driver" ] || missing+=("$driver")
if [ ${#missing[@]} -eq 0 ]; then
  echo "kernlint: browser for the HTML report tests: $chromium and $driver are installed"
  exit 0
fi

fail() {
  echo "kernlint: cannot install the browser for the HTML report tests: $*" >&2; exit 1
}

[ "$(id -u)" -eq 0 ] || fail "${missing[*]} missing and not root; run \`make browser\` as root, or as root: apt-get install chromium chromium-driver"
command -v apt-get >/dev/null 2>&1 || fail "${missing[*]} missing and no apt-get; install chromium and its chromedriver"

echo "kernlint: ${missing[*]} missing: installing chromium and chromium-driver with apt-get (a few minutes)"
apt-get update -qq || fail "apt-get update failed (see above)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver || fail "apt-get install failed (see above)"
for path in "$chromium" "$driver"; do
  [ -x "$path" ] || fail "apt-get installed the packages but $path is still missing"
done
echo "kernlint: installed $("$driver" --version 2>/dev/null | cut -d' ' -f1-2) and chromium"
