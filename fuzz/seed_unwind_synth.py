#!/usr/bin/env python3
"""Seeds of the unwind fuzz target from a real object's unwind sections:
   seed_unwind_synth.py OBJECT OUT
Writes the object's .eh_frame_hdr, .eh_frame and .debug_frame (if any) in
the layout of fuzz_unwind.h with a synthetic sample: the IP at one of its
functions, and a stack whose every slot holds a return address just past
the start of one of its functions, so that wherever the object's CFA rules
look for the caller's return address an unwind goes on through another of
its FDEs. x86-64 ELF objects only; prints nothing and writes nothing for
anything else."""
import struct
import sys

NREGS = 24
REG_BP, REG_SP, REG_IP = 6, 7, 8  # PERF_REG_X86_*
STACK_SLOTS = 512


def main(path, out):
    with open(path, "rb") as f:
        e = f.read()
    if e[:4] != b"\x7fELF" or e[4] != 2 or e[5] != 1:
        return
    e_type, e_machine = struct.unpack_from("<HH", e, 16)
    if e_machine != 62:
        return
    phoff, shoff = struct.unpack_from("<QQ", e, 32)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", e, 54)
    secs = []
    for i in range(shnum):
        name, _, _, addr, off, size = struct.unpack_from("<IIQQQQ", e, shoff + i * shentsize)
        secs.append((name, addr, off, size))
    stroff = secs[shstrndx][2]

    def sec(want):
        for name, addr, off, size in secs:
            end = e.index(b"\0", stroff + name)
            if e[stroff + name:end] == want:
                return addr, e[off:off + size]
        return 0, b""

    hdr_vaddr, hdr = sec(b".eh_frame_hdr")
    frame_vaddr, frame = sec(b".eh_frame")
    _, dbg = sec(b".debug_frame")
    if len(hdr) < 12 or hdr[0] != 1 or hdr[3] != 0x3B:
        return
    bias = 0x555555554000 if e_type == 3 else 0  # ET_DYN at a typical PIE base
    load_top, map_start, map_end = 0, 0, 0
    for i in range(phnum):
        p_type, p_flags, _, p_vaddr, _, _, p_memsz = struct.unpack_from("<IIQQQQQ", e, phoff + i * phentsize)
        if p_type != 1:
            continue
        load_top = max(load_top, p_vaddr + p_memsz)
        if p_flags & 1:
            map_start, map_end = (bias + p_vaddr) & ~0xFFF, bias + p_vaddr + p_memsz
    count = struct.unpack_from("<I", hdr, 8)[0]
    starts = [hdr_vaddr + struct.unpack_from("<i", hdr, 12 + 8 * k)[0]
              for k in range(min(count, (len(hdr) - 12) // 8))]
    if not starts:
        return
    regs = [0] * NREGS
    sp = 0x7FFD00000000
    regs[REG_IP] = bias + starts[len(starts) // 2]
    regs[REG_SP] = sp
    regs[REG_BP] = sp + 64
    stack = b"".join(struct.pack("<Q", bias + starts[(k * 7) % len(starts)] + 1) for k in range(STACK_SLOTS))
    head = struct.pack("<%dQ" % NREGS, *regs) + struct.pack(
        "<6Q4I", map_start, map_end, bias, hdr_vaddr, frame_vaddr, load_top,
        len(stack), len(hdr), len(frame), len(dbg))
    with open(out, "wb") as f:
        f.write(head + stack + hdr + frame + dbg)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
