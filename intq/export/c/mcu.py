"""Build a generated model for Cortex-M and run it under QEMU (semihosting), for the tests and reports.

Toolchain: Debian's ``gcc-arm-none-eabi`` with ``libnewlib-arm-none-eabi`` (newlib's ``rdimon``
semihosting C library) and ``qemu-system-arm``'s MPS2 boards: ``mps2-an386`` (Cortex-M4) and
``mps2-an500`` (Cortex-M7). The image is the model, the driver of :mod:`intq.export.c.driver` and a
minimal start-up (a vector table whose reset handler calls newlib's ``_start``); code and
constants go to the board's code memory at 0x0, data, arena and stack to the SSRAM at
0x20000000. ``printf`` reaches the host through semihosting; ``exit`` ends QEMU.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from intq.errors import IntqError

CC = "arm-none-eabi-gcc"
SIZE = "arm-none-eabi-size"
QEMU = "qemu-system-arm"


@dataclass(frozen=True)
class Core:
    name: str
    cpu_flags: tuple[str, ...]
    machine: str  # the QEMU board
    qemu_cpu: str


CORES = {
    "cortex-m4": Core("cortex-m4", ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft"), "mps2-an386", "cortex-m4"),
    "cortex-m7": Core("cortex-m7", ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=soft"), "mps2-an500", "cortex-m7"),
}

LINKER_SCRIPT = """\
/* MPS2 (AN386 Cortex-M4, AN500 Cortex-M7): 4 MiB code memory at 0, 4 MiB SSRAM at 0x20000000.
   QEMU loads every segment where it is linked: .data needs no copy from flash. */
MEMORY { CODE (rx) : ORIGIN = 0x00000000, LENGTH = 4M
         RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M }
ENTRY(intq_reset)
SECTIONS {
  .text : { KEEP(*(.intq_vectors)) *(.text*) KEEP(*(.init)) KEEP(*(.fini)) *(.rodata*) . = ALIGN(4); } > CODE
  .ARM.extab : { *(.ARM.extab*) } > CODE
  .ARM.exidx : { __exidx_start = .; *(.ARM.exidx*) __exidx_end = .; } > CODE
  .preinit_array : { PROVIDE_HIDDEN(__preinit_array_start = .); KEEP(*(.preinit_array)) PROVIDE_HIDDEN(__preinit_array_end = .); } > CODE
  .init_array : { PROVIDE_HIDDEN(__init_array_start = .); KEEP(*(SORT(.init_array.*))) KEEP(*(.init_array)) PROVIDE_HIDDEN(__init_array_end = .); } > CODE
  .fini_array : { PROVIDE_HIDDEN(__fini_array_start = .); KEEP(*(.fini_array)) PROVIDE_HIDDEN(__fini_array_end = .); } > CODE
  .data : { *(.data*) . = ALIGN(4); } > RAM
  .bss : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(4); __bss_end__ = .; } > RAM
  end = .; PROVIDE(__end__ = .);
  __stack = ORIGIN(RAM) + LENGTH(RAM);
  __intq_stack_top = __stack;
}
"""

STARTUP = """\
/* The reset vector of a bare Cortex-M: initial stack pointer, then newlib's _start (which clears
   .bss, opens the semihosting streams, runs main and exits through semihosting). */
extern void _start(void);
extern char __intq_stack_top;
void intq_reset(void);
void intq_reset(void) { _start(); for (;;) {} }
__attribute__((section(".intq_vectors"), used))
static void *const intq_vectors[2] = { &__intq_stack_top, (void *)intq_reset };
"""


def toolchain_missing() -> str | None:
    """What is missing to build and run for Cortex-M (None: all there)."""
    missing = [t for t in (CC, SIZE, QEMU) if shutil.which(t) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (Debian: apt-get install gcc-arm-none-eabi "
                "libnewlib-arm-none-eabi qemu-system-arm; `make mcu-toolchain`)")
    return None


def build_image(workdir: Path, sources: list[Path], core: str = "cortex-m4", opt: str = "-O2",
                defines=("MODEL_NO_FLOAT_IO",)) -> Path:
    """Compile ``sources`` (the model, the driver) with the start-up into ``workdir/<core>.elf``."""
    c = CORES[core]
    (workdir / "intq_startup.c").write_text(STARTUP)
    (workdir / "intq_mps2.ld").write_text(LINKER_SCRIPT)
    elf = workdir / f"{core}.elf"
    cmd = [CC, *c.cpu_flags, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wvla", opt,
           *(f"-D{d}" for d in defines), "-ffunction-sections", "-fdata-sections", "--specs=rdimon.specs",
           f"-T{workdir / 'intq_mps2.ld'}", "-Wl,--gc-sections", "-o", str(elf), *map(str, sources)]
    # the start-up uses GCC attributes, so it is built without -pedantic
    startup = [CC, *c.cpu_flags, "-std=gnu99", "-O2", "-c", str(workdir / "intq_startup.c"),
               "-o", str(workdir / "intq_startup.o")]
    for command in (startup, [*cmd, str(workdir / "intq_startup.o")]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise IntqError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return elf


def object_size(workdir: Path, source: Path, core: str = "cortex-m4", opt: str = "-O2") -> dict[str, int]:
    """``arm-none-eabi-size`` of one compiled source (the model alone): text (code + constants), data, bss."""
    obj = workdir / f"{source.stem}.{core}.o"
    subprocess.run([CC, *CORES[core].cpu_flags, "-std=c99", opt, "-DMODEL_NO_FLOAT_IO", "-c", str(source),
                    "-o", str(obj)], check=True, capture_output=True)
    out = subprocess.run([SIZE, str(obj)], check=True, capture_output=True, text=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    return {"text": text, "data": data, "bss": bss}


def run_qemu(elf: Path, core: str = "cortex-m4", timeout: float = 300) -> str:
    """Run the image on the core's MPS2 board; its semihosted stdout."""
    c = CORES[core]
    cmd = [QEMU, "-machine", c.machine, "-cpu", c.qemu_cpu, "-nographic", "-monitor", "none", "-serial", "none",
           "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise IntqError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]} {done.stdout[-500:]}")
    return done.stdout
