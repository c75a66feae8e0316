# shellcheck shell=bash
# What Slurm says about one job, as key=value lines: its live state (squeue), its accounting record (sacct) or,
# with accounting off, scontrol's; the wrapper's exit file and heartbeat age. Parsed by backends.slurm.
# Args: SLURM_JOB_ID RUN_DIR
slurm_observe() {
  local id=$1 rd=$2 acct hb now m ec
  case $id in '' | *[!0-9]*) return 0 ;; esac
  printf 'squeue=%s\n' "$(squeue -h -j "$id" -o %T 2> /dev/null | head -n1)"
  acct=$(sacct -X -n -P -j "$id" --format=JobID,State,ExitCode 2> /dev/null | awk -F'|' -v id="$id" '$1==id' | tail -n1)
  if [ -n "$acct" ]; then
    printf 'sacct=%s\n' "$acct"
  else
    printf 'scontrol=%s\n' "$(scontrol -o show job "$id" 2> /dev/null | head -n1)"
  fi
  ec=
  [ -f "$rd/exit_code" ] && { IFS= read -r -n 64 ec < "$rd/exit_code" || :; }
  printf 'exit_code=%s\n' "$ec"
  hb=
  if [ -f "$rd/heartbeat" ] && m=$(stat -c %Y -- "$rd/heartbeat" 2> /dev/null); then
    printf -v now '%(%s)T' -1
    hb=$((now - m))
  fi
  printf 'heartbeat_age=%s\n' "$hb"
}
