// Host driver of kernels/tests/amd_emulation.rs: runs the emulations of amd_emulation.h on the CPU
// (the same code NVRTC compiles for the emulated AMD targets, with the HostWave exchange instead
// of warp shuffles). Reads one command per line from stdin, writes one line of hex results per
// command; the Rust test computes every expected value on its own.
//
//   f16_to_f32 H            -> f32 bits        f32_to_f16 F        -> f16 bits
//   pk_sub A B / pk_mul A B -> u32             fdot2 A B C         -> f32 bits
//   mbcnt MASK ACC LANE     -> u32
//   bpermute EXEC ADDR*32 DATA*32             -> 32 results (lane order)
//   wmma GFX BF16 A*(32*R) B*(32*R) C*(32*8)  -> 32*8 f32 bits, lane-major (R = 8 for gfx11, 4 gfx12)
#include "amd_emulation.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace w4::emu;

static u32 hex(std::istringstream& in) {
    std::string t;
    in >> t;
    return (u32)std::stoul(t, nullptr, 16);
}

int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "f16_to_f32") {
            std::printf("%08x\n", f32_bits(f16_to_f32((u16)hex(in))));
        } else if (cmd == "f32_to_f16") {
            std::printf("%04x\n", (u32)f32_to_f16(bits_f32(hex(in))));
        } else if (cmd == "pk_sub" || cmd == "pk_mul") {
            const u32 a = hex(in), b = hex(in);
            std::printf("%08x\n", cmd == "pk_sub" ? pk_sub_f16(a, b) : pk_mul_f16(a, b));
        } else if (cmd == "fdot2") {
            const u32 a = hex(in), b = hex(in), c = hex(in);
            std::printf("%08x\n", f32_bits(fdot2_f32_f16(a, b, bits_f32(c))));
        } else if (cmd == "mbcnt") {
            const u32 mask = hex(in), acc = hex(in), lane = hex(in);
            std::printf("%08x\n", mbcnt_lo(mask, acc, (int)lane));
        } else if (cmd == "bpermute") {
            const u32 exec = hex(in);
            u32 addr[32], data[32];
            for (u32& v : addr) v = hex(in);
            for (u32& v : data) v = hex(in);
            const HostFrag f{data, 1};
            for (int l = 0; l < 32; ++l) std::printf("%08x ", (u32)ds_bpermute(HostWave{l, exec}, (int)addr[l], f));
            std::printf("\n");
        } else if (cmd == "wmma") {
            const u32 gfx = hex(in), bf16 = hex(in);
            const int regs = gfx == 11 ? 8 : 4;
            std::vector<u32> a(32 * regs), b(32 * regs), c(32 * 8);
            for (u32& v : a) v = hex(in);
            for (u32& v : b) v = hex(in);
            for (u32& v : c) v = hex(in);
            const HostFrag fa{a.data(), regs}, fb{b.data(), regs};
            for (int l = 0; l < 32; ++l) {
                float d[8];
                for (int r = 0; r < 8; ++r) d[r] = bits_f32(c[l * 8 + r]);
                const HostWave x{l, 0xffffffffu};
                if (gfx == 11 && bf16) wmma_gfx11<true>(x, fa, fb, d);
                if (gfx == 11 && !bf16) wmma_gfx11<false>(x, fa, fb, d);
                if (gfx == 12 && bf16) wmma_gfx12<true>(x, fa, fb, d);
                if (gfx == 12 && !bf16) wmma_gfx12<false>(x, fa, fb, d);
                for (float v : d) std::printf("%08x ", f32_bits(v));
            }
            std::printf("\n");
        } else {
            std::fprintf(stderr, "unknown command: %s\n", cmd.c_str());
            return 2;
        }
    }
    return 0;
}
