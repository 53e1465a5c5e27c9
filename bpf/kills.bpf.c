// kills: SIGKILL and SIGTERM sent by a task (kill(2), tgkill, pidfd_send_signal, cgroup.kill),
// the way userspace memory killers (earlyoom, systemd-oomd, oomd, nohang, the kubelet) kill. The
// OOM killer's own SIGKILL is oom:mark_victim's (bpf/oom.bpf.c) and is left out here.
//
// signal:signal_generate fires in the sender (the current task) with the target's pid and comm,
// the signal, its si_code and the delivery result. Every other signal returns at the first test,
// so a signal-heavy program pays one comparison. Kills are rare: each goes through a ring buffer.
//
// Configured with -DHAVE_CODE (the tracepoint has si_code), -DRINGBUF_PAGES=<n>.

#ifndef RINGBUF_PAGES
#define RINGBUF_PAGES 8
#endif

#ifndef KILL_SIGKILL
#define KILL_SIGKILL 9
#endif
#ifndef KILL_SIGTERM
#define KILL_SIGTERM 15
#endif
// si_code of a signal the kernel sends on its own behalf (SEND_SIG_PRIV): the OOM killer's SIGKILL
#ifndef KILL_SI_KERNEL
#define KILL_SI_KERNEL 128
#endif

struct kill_event_t {
    u64 ts_ns;
    u32 sender_pid;
    u32 sender_tid;
    u32 victim_pid;
    s32 sig;
    s32 code;
    s32 group;
    s32 result;
    u32 pad;
    char sender_comm[16];
    char victim_comm[16];
};

#include "common.h"

BPF_RINGBUF_OUTPUT(kill_events, RINGBUF_PAGES);
BPF_PERCPU_ARRAY(kills_lost, u64, 1);

TRACEPOINT_PROBE(signal, signal_generate) {
    int sig = args->sig;
    if (sig != KILL_SIGKILL && sig != KILL_SIGTERM)
        return 0;
#ifdef HAVE_CODE
    if (args->code == KILL_SI_KERNEL)
        return 0;
#endif
    struct kill_event_t *e = kill_events.ringbuf_reserve(sizeof(*e));
    if (!e) {
        int zero = 0;
        memtop_bump(kills_lost.lookup(&zero));
        return 0;
    }
    u64 id = bpf_get_current_pid_tgid();
    __builtin_memset(e, 0, sizeof(*e));
    e->ts_ns = bpf_ktime_get_ns();
    e->sender_pid = id >> 32;
    e->sender_tid = (u32)id;
    e->victim_pid = args->pid;
    e->sig = sig;
#ifdef HAVE_CODE
    e->code = args->code;
#endif
    e->group = args->group;
    e->result = args->result;
    bpf_get_current_comm(&e->sender_comm, sizeof(e->sender_comm));
    bpf_probe_read_kernel(&e->victim_comm, sizeof(e->victim_comm), args->comm);
    kill_events.ringbuf_submit(e, 0);
    return 0;
}
