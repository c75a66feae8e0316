# shellcheck shell=bash
# Which of the commands named as arguments this host has on PATH: one name a line (static text).
for n in "$@"; do
  command -v "$n" > /dev/null 2>&1 && echo "$n"
done
exit 0
