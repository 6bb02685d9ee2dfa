# Counts libpulse's allocations of send-queue entries (pstream.c's item_info, 96 bytes) over a run:
# the pa_xmalloc calls in pa_pstream_send_memblock, _packet and _release of libpulse 16.1 as Debian
# 12 ships it (the offsets are that build's call instructions; `disassemble pa_pstream_send_packet`
# in gdb finds them in another). PulseConnection fills the process-wide free list these come from
# with 64 entries when the process first connects; a run should allocate none after those.
#
#   OPENAVF_TEST_SERVER=pipewire gdb -batch -x Scripts/libpulse-items.gdb --args .build/debug/openavf-rtcheck
set pagination off
set breakpoint pending on
set $mem = 0
set $pkt = 0
set $rel = 0
break pa_context_new_with_proplist
run
delete 1
break *pa_pstream_send_memblock+286
commands
silent
set $mem = $mem + 1
continue
end
break *pa_pstream_send_packet+437
commands
silent
set $pkt = $pkt + 1
continue
end
break *pa_pstream_send_release+269
commands
silent
set $rel = $rel + 1
continue
end
continue
printf "send-queue entries allocated: memblock %d packet %d release %d\n", $mem, $pkt, $rel
