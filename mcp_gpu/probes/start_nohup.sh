# shellcheck shell=bash
# Start a job's wrapper detached with setsid, leading its own session and process group (static text).
# Args: RUN_DIR SCRIPT WORKDIR HEARTBEAT_S [SANDBOX-PREFIX...]; stdin: the environment lines (lib/feed.sh).
# Exit 20: no setsid; 21: no FIFO; 23: the wrapper never read its environment.
# include: lib/feed.sh
set -u
rd=$1 script=$2 wd=$3 hb=$4
shift 4  # the rest: the sandbox a job on the server's own machine starts in (LaunchSpec.sandbox), or nothing
command -v setsid > /dev/null 2>&1 || { echo "setsid not found on PATH" >&2; exit 20; }
fifo=$rd/.env.fifo
rm -f -- "$fifo"
mkfifo -m 600 -- "$fifo" || exit 21
# no nohup: it would leave SIGHUP ignored inside the job (the wrapper handles hangups itself)
setsid ${1+"$@"} "${BASH:-bash}" "$rd/wrapper.sh" "$rd" "$script" "$wd" "$fifo" "$hb" < /dev/null > /dev/null 2>&1 &
feed_env "$fifo" "$rd"
