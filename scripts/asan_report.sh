#!/usr/bin/env bash
# Prints the sanitizer reports `make asan` collected (ASAN_OPTIONS/UBSAN_OPTIONS log_path point
# into the folder given), one block per report file, and a count; exits 1 when there are any.
set -u
dir=${1:-build-asan/logs}
shopt -s nullglob
files=("$dir"/asan.* "$dir"/ubsan.*)
if [ ${#files[@]} -eq 0 ]; then
  echo "make asan: no AddressSanitizer or UBSan reports"
  exit 0
fi
for f in "${files[@]}"; do
  echo "==== $f"
  # the report's headline and the frames in the plugin's own sources
  grep -E "ERROR: AddressSanitizer|runtime error:|SUMMARY:|#[0-9]+ .*(src/|tools/)" "$f" | head -40
done
echo "make asan: ${#files[@]} report file(s) in $dir"
exit 1
