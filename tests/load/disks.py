"""File systems for a load case's state dir (issue 45 item 2), each mounted for a `with` block
and unmounted at its end, error or not (root only, as CI runs):

- `SmallDisk(path, kib)`: a tmpfs of `kib` KiB that a run fills; `grow(kib)` remounts it
  larger (the space freed), `leave(kib)` to what it holds and `kib` KiB more (the fault
  campaign's disk-full fault, tests/chaos/disk_full.py).
- `SlowDisk(path, image)`: an ext4 file system in the file `image` on a loop device, mounted
  `sync` (every write goes to the device from the process that writes it), its reads and writes
  throttled for this process and its children by the block I/O controller: cgroup v2's
  `io.max` where the unified hierarchy offers the `io` controller, else cgroup v1's
  `blkio.throttle.*` (this machine's kernel offers `io` nowhere in v2; device-mapper, for
  dm-delay, is not there either). The throttle holds for that device only: the harness's other
  files and the CPU hogs are not slowed.

A mount, loop device or cgroup the system refuses raises `DiskRefused`, naming the command and
what it said."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from pathlib import Path

from slipstream.core.closing import StartStop

CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_V1_BLKIO = Path("/sys/fs/cgroup/blkio")
#: a number for each throttled disk of this process, in its cgroup's name
GROUPS = itertools.count(1)


class DiskRefused(RuntimeError):
    """The system refused a mount, a loop device or a cgroup."""


def sh(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise DiskRefused(f"`{' '.join(command)}` refused (exit {done.returncode}): {said}")
    return done.stdout.strip()


def unmount(path: Path) -> None:
    """Unmount `path`; lazily when it is busy (a process of a failed case still in it)."""
    if not os.path.ismount(path):
        return
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


class SmallDisk(StartStop):
    def __init__(self, path: Path, kib: int) -> None:
        self.path, self.kib = path, kib

    def start(self) -> SmallDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        sh("mount", "-t", "tmpfs", "-o", f"size={self.kib}k,mode=0700", "tmpfs", str(self.path))
        return self

    def grow(self, kib: int) -> None:
        sh("mount", "-o", f"remount,size={kib}k", str(self.path))
        self.kib = kib

    def used_kib(self) -> int:
        stat = os.statvfs(self.path)
        return (stat.f_blocks - stat.f_bfree) * stat.f_frsize // 1024

    def leave(self, kib: int) -> None:
        """Remount it to what it holds now and `kib` KiB more (a tmpfs cannot be made smaller
        than what it holds)."""
        self.grow(self.used_kib() + kib)

    def stop(self) -> None:
        unmount(self.path)


def io_controller_v2() -> bool:
    offered = CGROUP_V2 / "cgroup.controllers"
    return offered.is_file() and "io" in offered.read_text().split()


class SlowDisk(StartStop):
    """`bps` bytes and `iops` operations a second, each way, on a `mib` MiB ext4."""

    def __init__(
        self, path: Path, image: Path, mib: int = 256, bps: int = 1 << 20, iops: int = 100
    ) -> None:
        self.path, self.image, self.mib, self.bps, self.iops = path, image, mib, bps, iops
        self.device = ""
        self.group: Path | None = None
        self.home: Path | None = None  # the cgroup this process leaves, and returns to
        self.how = ""  # which controller throttles, for the report
        self.served = ""  # the I/O it throttled, read as it stops

    def start(self) -> SlowDisk:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as image:
            image.truncate(self.mib << 20)
        sh("mkfs.ext4", "-q", "-F", str(self.image))
        self.device = sh("losetup", "--find", "--show", str(self.image))
        sh("mount", "-o", "sync", self.device, str(self.path))
        self.path.chmod(0o700)
        self._throttle(Path("/sys/class/block", Path(self.device).name, "dev").read_text().strip())
        return self

    def _throttle(self, numbers: str) -> None:
        # its own name: a group an earlier disk of this process could not remove (a process
        # of a case still in it) would otherwise refuse the next one
        name = f"slipstream-load-{os.getpid()}-{next(GROUPS)}-{Path(self.device).name}"
        if io_controller_v2():
            self.group, self.home = CGROUP_V2 / name, CGROUP_V2
            self.group.mkdir()
            limits = f"rbps={self.bps} wbps={self.bps} riops={self.iops} wiops={self.iops}"
            (self.group / "io.max").write_text(f"{numbers} {limits}\n")
            self.how = f"cgroup v2 io.max {limits}"
        elif CGROUP_V1_BLKIO.is_dir():
            self.group, self.home = CGROUP_V1_BLKIO / name, self._v1_home()
            self.group.mkdir()
            for way in ("read", "write"):
                (self.group / f"blkio.throttle.{way}_bps_device").write_text(
                    f"{numbers} {self.bps}\n"
                )
                (self.group / f"blkio.throttle.{way}_iops_device").write_text(
                    f"{numbers} {self.iops}\n"
                )
            self.how = f"cgroup v1 blkio.throttle: {self.bps} B/s and {self.iops} IO/s each way"
        else:
            raise DiskRefused("no block I/O controller: neither cgroup v2's io nor v1's blkio")
        (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def _served(self) -> str:
        """The I/O that went through the throttle: cgroup v1's `Total` lines (operations,
        bytes), or v2's io.stat line."""
        assert self.group is not None
        if (self.group / "io.stat").is_file():
            return (self.group / "io.stat").read_text().strip()
        said = []
        for name, unit in (("io_serviced", "operations"), ("io_service_bytes", "bytes")):
            text = (self.group / f"blkio.throttle.{name}").read_text()
            lines = text.splitlines()
            total = next((ln.split()[-1] for ln in lines if ln.startswith("Total")), "0")
            said.append(f"{int(total):,} {unit}")
        return " and ".join(said) + " through the throttle"

    @staticmethod
    def _v1_home() -> Path:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            if "blkio" in controllers.split(","):
                return CGROUP_V1_BLKIO / where.lstrip("/")
        return CGROUP_V1_BLKIO

    def stop(self) -> None:
        if self.group is not None and self.home is not None:
            self.served = self._served()
            # this process, and any started meanwhile that still lives (a JVM on its way out,
            # another case's run when cases run together): home, so the group can go
            pids = [str(os.getpid()), *(self.group / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(OSError):  # it ended meanwhile
                    (self.home / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):  # one started in between: left, empty soon
                self.group.rmdir()
            self.group = None
        unmount(self.path)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = ""
        self.image.unlink(missing_ok=True)
