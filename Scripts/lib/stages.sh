# Stage timing for Scripts/test and Scripts/soak: `stage NAME COMMAND...` runs the command under a
# heading, notes its wall time, and the table of every stage's time is printed when the script
# ends, whether it passed or not.

OPENAVF_STAGE_NAMES=()
OPENAVF_STAGE_TIMES=()
OPENAVF_STAGE_RESULTS=()
OPENAVF_STARTED=$SECONDS

stage() {
    local name=$1
    shift
    echo "== $name"
    local t0=$SECONDS status=0
    "$@" || status=$?
    OPENAVF_STAGE_NAMES+=("$name")
    OPENAVF_STAGE_TIMES+=($((SECONDS - t0)))
    OPENAVF_STAGE_RESULTS+=("$([ $status -eq 0 ] && echo ok || echo "FAILED ($status)")")
    return $status
}

print_stage_times() {
    local i
    echo "== stage times (wall clock)"
    for i in "${!OPENAVF_STAGE_NAMES[@]}"; do
        printf '%6d s  %-10s %s\n' "${OPENAVF_STAGE_TIMES[$i]}" "${OPENAVF_STAGE_RESULTS[$i]}" "${OPENAVF_STAGE_NAMES[$i]}"
    done
    printf '%6d s  total\n' $((SECONDS - OPENAVF_STARTED))
}
