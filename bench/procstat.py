"""The CPU time a process has used, and a mount's daemon's, from /proc: what the bench scripts
take before and after a run to give CPU seconds per GiB."""
import json
import os


def cpu_seconds(pid):
    """utime + stime of process pid so far, in seconds (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_cpu(mount):
    """cpu_seconds of the daemon serving mount (its stats.json's daemon_pid)."""
    with open(os.path.join(mount, ".blockfs", "stats.json")) as f:
        return cpu_seconds(json.load(f)["daemon_pid"])
