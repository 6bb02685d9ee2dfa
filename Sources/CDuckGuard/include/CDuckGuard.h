// The duck guard: a small child process that puts other clients' stream volumes back when the
// process that lowered them ends, however it ends (exit, crash, SIGKILL).
//
// Used where the sound server cannot duck by itself (PipeWire's pipewire-pulse has no
// module-role-ducking): the library lowers other clients' playback streams with ordinary volume
// calls, and before each one tells the guard, through a socket pair, the volume to put back. When
// this process's end closes (the library ends ducking, or the process dies and the kernel closes
// it), the guard connects to the server over its native protocol, sets every remembered stream
// back and exits.
//
// The guard is forked, not executed: there is no helper binary to install. Between fork and exit
// it calls only async-signal-safe functions (read, socket, connect, write, poll, close, _exit)
// on memory it does not allocate, as POSIX requires of a child of a threaded process.
#ifndef OPENAVF_CDUCKGUARD_H
#define OPENAVF_CDUCKGUARD_H
#include <stdint.h>
#include <sys/types.h>

/// The most channels one remembered stream has (PulseAudio's PA_CHANNELS_MAX).
#define OPENAVF_DUCK_GUARD_MAX_CHANNELS 32
/// The most streams the guard remembers at once (the library lowers no more than that).
#define OPENAVF_DUCK_GUARD_MAX_STREAMS 256

/// Starts a guard for the server listening on the UNIX socket `socket_path`, authenticating with
/// `cookie` (256 bytes; PulseAudio's cookie, ignored by pipewire-pulse; NULL sends zeros).
/// Returns the guard's pid and stores this process's end of the socket pair (close-on-exec) in
/// `*write_fd`, or returns -1 with errno set.
pid_t openavf_duck_guard_start(const char *socket_path, const uint8_t *cookie, int *write_fd);

/// Tells the guard to put stream `index` back at `volumes` (`channels` values on the server's
/// scale, PA_VOLUME_NORM = 100 %) when it ends. Returns 0, or -1 with errno set.
int openavf_duck_guard_remember(int write_fd, uint32_t index, uint8_t channels, const uint32_t *volumes);

/// Tells the guard to leave stream `index` alone (it went, or someone else set its volume since).
int openavf_duck_guard_forget(int write_fd, uint32_t index);

/// Tells the guard it is done (a forked copy of this process may still hold the other end), closes
/// this process's end and waits for the guard to have put every remembered stream back and
/// exited (it gives up on a server that does not answer within two seconds). Returns 0, or -1
/// when the guard could not put everything back (or had gone).
int openavf_duck_guard_finish(int write_fd, pid_t pid);

#endif
