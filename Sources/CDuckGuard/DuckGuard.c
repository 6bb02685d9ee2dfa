// The duck guard (see CDuckGuard.h). Everything after fork() in the child is async-signal-safe:
// no malloc, no stdio, no locks; memory is the stack and this file's static buffers, which the
// child has as its own copy.
#define _GNU_SOURCE
#include "CDuckGuard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OP_REMEMBER = 1, OP_FORGET = 2, OP_DONE = 3 };

/// One message to the guard (140 bytes).
struct guard_record {
    uint32_t op;
    uint32_t index;
    uint32_t channels;
    uint32_t volumes[OPENAVF_DUCK_GUARD_MAX_CHANNELS];
};

// PulseAudio's native protocol, as much of it as the guard speaks: commands are packets of a
// 20-byte descriptor (payload length, channel 0xFFFFFFFF for commands, two offset words, flags)
// and a tagged payload ('L' + big-endian u32, 'x' arbitrary bytes, 't' string, 'v' volumes,
// 'P' property list ended by 'N').
enum {
    PA_ERROR = 0,
    PA_REPLY = 2,
    PA_AUTH = 8,
    PA_SET_CLIENT_NAME = 9,
    PA_SET_SINK_INPUT_VOLUME = 37,
};
#define PA_PROTOCOL 32
#define PA_COOKIE_LENGTH 256
#define DESCRIPTOR 20
#define GIVE_UP_MS 2000

// The child's memory: the streams to put back and the packets that do it.
static struct guard_record table[OPENAVF_DUCK_GUARD_MAX_STREAMS];
static int table_count;
static uint8_t out[DESCRIPTOR * (OPENAVF_DUCK_GUARD_MAX_STREAMS + 2) + 512 + OPENAVF_DUCK_GUARD_MAX_STREAMS * (16 + 2 + 4 * OPENAVF_DUCK_GUARD_MAX_CHANNELS)];
static uint8_t in[4096];

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/// Writes a tagged u32 at `p`; returns the bytes written.
static size_t tag_u32(uint8_t *p, uint32_t v) {
    p[0] = 'L';
    put_be32(p + 1, v);
    return 5;
}

/// Starts a packet at `p` (its descriptor is filled by end_packet); returns where the payload goes.
static uint8_t *begin_packet(uint8_t *p, uint32_t command, uint32_t tag) {
    uint8_t *payload = p + DESCRIPTOR;
    payload += tag_u32(payload, command);
    payload += tag_u32(payload, tag);
    return payload;
}

static uint8_t *end_packet(uint8_t *start, uint8_t *end) {
    put_be32(start, (uint32_t)(end - start - DESCRIPTOR));
    put_be32(start + 4, 0xFFFFFFFFu);
    put_be32(start + 8, 0);
    put_be32(start + 12, 0);
    put_be32(start + 16, 0);
    return end;
}

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/// Waits for `events` on `fd` until `deadline`; 1 when ready, 0 on timeout or error.
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 0;
    }
}

/// Sends `length` bytes of `out` and reads the server's answers to the `expected` commands just
/// sent (every command is answered, in order, by a reply or an error). 1 when all came in time.
static int exchange(int s, size_t length, uint32_t expected, int64_t deadline) {
    size_t sent = 0;
    while (sent < length) {
        ssize_t w = write(s, out + sent, length - sent);
        if (w > 0) {
            sent += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            if (!wait_fd(s, POLLOUT, deadline)) return 0;
        } else {
            return 0;
        }
    }
    uint32_t answers = 0;
    size_t have = 0;
    while (answers < expected) {
        if (!wait_fd(s, POLLIN, deadline)) return 0;
        ssize_t r = read(s, in + have, sizeof in - have);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) return 0;
        have += (size_t)r;
        while (have >= DESCRIPTOR) {
            uint32_t size = get_be32(in);
            if (size > sizeof in - DESCRIPTOR) return 0;  // no answer of ours is that large
            if (have < DESCRIPTOR + size) break;
            if (get_be32(in + 4) == 0xFFFFFFFFu && size >= 5 && in[DESCRIPTOR] == 'L') {
                uint32_t command = get_be32(in + DESCRIPTOR + 1);
                if (command == PA_REPLY || command == PA_ERROR) answers++;
            }
            size_t used = DESCRIPTOR + size;
            memmove(in, in + used, have - used);
            have -= used;
        }
    }
    return 1;
}

/// Connects, authenticates, names itself and, once the server has answered that (pipewire-pulse
/// knows the server's streams only from then on), sets every remembered stream back; waits for
/// the server's answers, so that nothing is cut short when it hangs up. At most GIVE_UP_MS.
/// 1 when every command was answered.
static int put_back(const struct sockaddr_un *address, const uint8_t *cookie) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return 0;
    int64_t deadline = now_ms() + GIVE_UP_MS;
    // A UNIX socket connects at once, or says EAGAIN while the server's backlog is full.
    while (connect(s, (const struct sockaddr *)address, sizeof *address) < 0) {
        if ((errno != EAGAIN && errno != EINTR) || now_ms() >= deadline) {
            close(s);
            return 0;
        }
        poll(NULL, 0, 10);
    }

    uint32_t tag = 0;
    uint8_t *p = out, *q;

    q = begin_packet(p, PA_AUTH, tag++);
    q += tag_u32(q, PA_PROTOCOL);
    *q++ = 'x';
    put_be32(q, PA_COOKIE_LENGTH);
    q += 4;
    memcpy(q, cookie, PA_COOKIE_LENGTH);
    q += PA_COOKIE_LENGTH;
    p = end_packet(p, q);

    static const char key[] = "application.name";
    static const char name[] = "OpenAVFAudio duck guard";
    q = begin_packet(p, PA_SET_CLIENT_NAME, tag++);
    *q++ = 'P';
    *q++ = 't';
    memcpy(q, key, sizeof key);
    q += sizeof key;
    q += tag_u32(q, sizeof name);
    *q++ = 'x';
    put_be32(q, sizeof name);
    q += 4;
    memcpy(q, name, sizeof name);
    q += sizeof name;
    *q++ = 'N';
    p = end_packet(p, q);
    int ok = 0;
    if (!exchange(s, (size_t)(p - out), 2, deadline)) goto done;

    p = out;
    for (int n = 0; n < table_count; n++) {
        q = begin_packet(p, PA_SET_SINK_INPUT_VOLUME, tag++);
        q += tag_u32(q, table[n].index);
        *q++ = 'v';
        *q++ = (uint8_t)table[n].channels;
        for (uint32_t c = 0; c < table[n].channels; c++) {
            put_be32(q, table[n].volumes[c]);
            q += 4;
        }
        p = end_packet(p, q);
    }
    ok = exchange(s, (size_t)(p - out), (uint32_t)table_count, deadline);
done:
    close(s);
    return ok;
}

static void remember(const struct guard_record *r) {
    uint32_t channels = r->channels;
    if (channels == 0 || channels > OPENAVF_DUCK_GUARD_MAX_CHANNELS) return;
    int slot = -1;
    for (int n = 0; n < table_count; n++) {
        if (table[n].index == r->index) slot = n;
    }
    if (slot < 0) {
        if (table_count == OPENAVF_DUCK_GUARD_MAX_STREAMS) return;
        slot = table_count++;
    }
    table[slot] = *r;
}

static void forget(uint32_t index) {
    for (int n = 0; n < table_count; n++) {
        if (table[n].index == index) {
            table[n] = table[--table_count];
            return;
        }
    }
}

/// The child: keeps what it is told until the other end closes, then puts it back and exits.
static void guard_main(int read_fd, const struct sockaddr_un *address, const uint8_t *cookie) {
    // A terminal's ^C or hang-up, or a service manager's SIGTERM to the whole group, must not
    // end the guard before the process it guards: it leaves the group and ignores them, and
    // ends by itself as soon as that process has.
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    const int ignored[] = {SIGINT, SIGHUP, SIGTERM, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
    for (size_t n = 0; n < sizeof ignored / sizeof ignored[0]; n++) sigaction(ignored[n], &ignore, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setsid();

    // Nothing of the parent's stays open here: above all not its connection to the server,
    // which must end when the parent does.
#ifdef SYS_close_range
    if ((read_fd > 0 && syscall(SYS_close_range, 0u, (unsigned)read_fd - 1u, 0u) < 0) || syscall(SYS_close_range, (unsigned)read_fd + 1u, ~0u, 0u) < 0)
#endif
    {
        for (int fd = 0; fd < 65536; fd++) {
            if (fd != read_fd) close(fd);
        }
    }

    struct guard_record record;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(read_fd, (uint8_t *)&record + have, sizeof record - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        if (have < sizeof record) continue;
        have = 0;
        if (record.op == OP_REMEMBER) remember(&record);
        else if (record.op == OP_FORGET) forget(record.index);
        else if (record.op == OP_DONE) break;  // as good as the end (a forked copy may hold the other end)
    }
    if (table_count > 0 && !put_back(address, cookie)) _exit(1);
    _exit(0);
}

pid_t openavf_duck_guard_start(const char *socket_path, const uint8_t *cookie, int *write_fd) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    size_t length = strlen(socket_path);
    if (length == 0 || length >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address.sun_path, socket_path, length);
    uint8_t secret[PA_COOKIE_LENGTH];
    if (cookie) memcpy(secret, cookie, sizeof secret);
    else memset(secret, 0, sizeof secret);

    // A socket pair rather than a pipe: a guard that is gone must not kill this process with
    // SIGPIPE when it is next told something (send with MSG_NOSIGNAL).
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) guard_main(fds[0], &address, secret);  // never returns
    close(fds[0]);
    *write_fd = fds[1];
    return pid;
}

static int send_record(int write_fd, const struct guard_record *record) {
    const uint8_t *bytes = (const uint8_t *)record;
    size_t sent = 0;
    while (sent < sizeof *record) {
        ssize_t w = send(write_fd, bytes + sent, sizeof *record - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        sent += (size_t)w;
    }
    return 0;
}

int openavf_duck_guard_remember(int write_fd, uint32_t index, uint8_t channels, const uint32_t *volumes) {
    if (channels == 0 || channels > OPENAVF_DUCK_GUARD_MAX_CHANNELS) {
        errno = EINVAL;
        return -1;
    }
    struct guard_record record;
    memset(&record, 0, sizeof record);
    record.op = OP_REMEMBER;
    record.index = index;
    record.channels = channels;
    memcpy(record.volumes, volumes, channels * sizeof volumes[0]);
    return send_record(write_fd, &record);
}

int openavf_duck_guard_forget(int write_fd, uint32_t index) {
    struct guard_record record;
    memset(&record, 0, sizeof record);
    record.op = OP_FORGET;
    record.index = index;
    return send_record(write_fd, &record);
}

int openavf_duck_guard_finish(int write_fd, pid_t pid) {
    struct guard_record done;
    memset(&done, 0, sizeof done);
    done.op = OP_DONE;
    send_record(write_fd, &done);
    close(write_fd);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return -1;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
