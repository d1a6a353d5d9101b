#!/usr/bin/env python3
# Drafts cases/exceptions/coverage.toml from the records coverage/<gfx>.json (usage: scripts/draft-coverage-reasons.py gfx1100 gfx1151 gfx1201):
# entries no CI suite launches and tile rungs as blocks = "all"; the blocks of launched entries by what they are
# (RULES below: source line and first instruction, each reason found by reading the machine code, docs/block-coverage.md);
# anything no rule names as "not yet triaged". A draft for review: a new kernel's gaps land in the last group.
import json, re, sys, collections
import os
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
targets = sys.argv[1:]
EXP = '2027-06-30'
TRACK = 'issue 31 (machine-code coverage)'
R_SUITES = ("entries no CI suite launches on this target: the suites the ISA emulator runs in CI "
            "(smoke, checkpoints, kernels, edges, selection) include neither `moe` nor `carrier`; both run on the "
            "GPU and on the emulated gfx targets (verdicts-moe@*, verdicts-carrier@*)")
R_NOT_IN_TABLE = "a rung the target's tile table never selects (snapshots/selection_tiles@{t}.snap)"
R_IN_TABLE = ("a rung of the target's tile table that no CI case selects within the ISA emulator's budget (the cases run take other rungs; snapshots/selection_tiles@{t}.snap)")
R_PLAIN = "the untiled entry point (64x64 tile): selection for the AMD targets always launches a tile-table rung"
R_OPEN = ("blocks no CI case reaches on the ISA emulator, not yet triaged block by block: each one's "
          "source line and first instructions are in coverage/{t}.md")
# (kernel, source line regex, first-instruction regex, reason): the first rule that matches names the block.
RULES = [
    ('fused', r'compat\.h:366$', None,
     "bf16 NaN quieting in the epilogue's rounding (compat.h, Act<bf16>::from_f32), one copy per accumulator "
     "element: the special-values cases make NaN outputs only in the rows their seed picks (one row in eight "
     "carries a non-finite X, half of those NaN), so the copies for the other row positions never round a NaN. "
     "Each copy is the same instructions on another register; the copies that ran were judged (NaN positions must match)"),
    ('fused', r'gemm_tile\.h:206$', None,
     "the K loop's zero-trip exit (gemm_tile.h: nk = K / 32 steps, accumulators left at zero): fused takes only "
     "G in {32, 64, 128} dividing K (its declared contract), so nk >= 1 on every launch the harness can make"),
    ('fused', r'gemm_tile\.h:103$', r'^s_branch 1$',
     "the element-wise X copy's loop latch (gemm_tile.h load_stage_a, X not 16-byte aligned): the compiler sets "
     "the exit flag to 0 on that path, so the branch after it never runs; the element-wise copy itself runs "
     "(edges: strided and offset X at fused M)"),
    ('fused', r'(fused\.hip:6[34]|compat\.h:358)$', None,
     "the bias epilogue (fused.hip: bias added after the cast) of a rung the bias cases on the ISA emulator do not "
     "select on this target: edges' bias sweeps (bias at every path; the emu.* sweeps at M 17, 48, 64) take this "
     "target's other rungs, where the same source lines run and are judged; this rung needs a bias case at an M, N, K "
     "its table row selects within the emulator's budget"),
    ('fused', r'gemm_tile\.h:(10[3-9]|11[0-2])$', None,
     "the element-wise X copy (gemm_tile.h load_stage_a, X not 16-byte aligned) of a rung no strided or offset X "
     "case selects on this target within the emulator's budget: edges' strided-X sweeps take the target's other "
     "rungs, where the same source lines run and are judged"),
    ('dequant', r'dequant\.hip:48$', None,
     "dequant's store for an output row that is not 16-byte aligned (dequant.hip): the dense cache's rows are "
     "K elements with K % 8 == 0 on an aligned allocation, so the harness never hands it a misaligned row"),
    ('fallback', None, r'^v_mov_b32_e32 v\d+, 0$',
     "the group loop's zero-trip exit of a pass (fallback.hip: K / G groups, sums left at zero): G divides K "
     "and K > 0 on every launch the contract takes"),
    ('fallback', r'compat\.h:366$', None,
     "bf16 NaN quieting in the fallback's store (compat.h, Act<bf16>::from_f32), one copy per row of each pass "
     "width: the special-values cases make NaN outputs only in the rows their seed picks, so some row positions of "
     "some widths never round a NaN; the copies that ran were judged (NaN positions must match)"),
    ('skinny', r'skinny\.hip:643$', None,
     "the split-K reduction's body unrolled by 8 (skinny.hip: for s in 1..nks): nks is at most the block's 8 "
     "warps, so the loop runs at most 7 times and only its remainder copy runs"),
    ('skinny', r'skinny\.hip:427$', None,
     "exec-mask joins of the two-slot weight ring (skinny.hip, W4_SKINNY_RING_UNROLL) entered when the wave's "
     "lanes disagree on whether the next span exists: the span index is the warp's, so every case's lanes agree "
     "(the compiler emits the divergent form of a warp-uniform branch); the ring runs in every case"),
    ('skinny', None, r'^s_branch ',
     "a one-instruction `s_branch` the control-flow structurizer places on the exec-zero (or vcc-zero) side of a "
     "branch in skinny's span loop: taken only when no lane of the wave is active at that point, which no case's "
     "launch geometry makes; the code on both sides of it runs"),
]
def rule_for(kernel, block):
    for k, line, first, reason in RULES:
        if k != kernel: continue
        if line and not (block['line'] and re.search(line, block['line'])): continue
        if first and not re.search(first, block['first'][0]): continue
        return reason
    return None
def rungs(t):
    out = {'f16': set(), 'bf16': set()}
    for line in open(f'{root}/snapshots/selection_tiles@{t}.snap'):
        m = re.match(r'^(f16|bf16) .*→ (\S+) \(field', line)
        if m: out[m.group(1)].add(m.group(2))
    return out
alls = collections.OrderedDict()   # (entry glob, reason) -> [targets]
lists = []
for t in targets:
    rec = json.load(open(f'{root}/coverage/{t}.json'))
    tab = rungs(t)
    for e in rec['entries']:
        name, k = e['entry'], e['kernel']
        if e['executed'] == 0:
            if k in ('moe', 'moe_align'):
                key = ('w4a16_moe_*', R_SUITES)
            elif k == 'fused_carrier':
                key = ('w4a16_fused_carrier_*', R_SUITES)
            elif k == 'fused':
                m = re.match(r'w4a16_fused_(f16|bf16)(?:_(\S+))?$', name)
                dt, rung = m.group(1), m.group(2)
                if rung is None: key = (name, R_PLAIN)
                elif rung in tab[dt]: key = (name, R_IN_TABLE)
                else: key = (name, R_NOT_IN_TABLE)
            else:
                key = (name, R_OPEN)
            alls.setdefault(key, [])
            if t not in alls[key]: alls[key].append(t)
            continue
        unc = sorted(e['uncovered'], key=lambda b: int(b['offset'][3:], 16))
        groups = collections.OrderedDict()   # reason -> offsets
        prev = None
        for b in unc:
            reason = rule_for(k, b)
            # The block with no source line that the zero-trip exit jumps to (zeroed accumulators) is that exit.
            if reason is None and b['line'] is None and k == 'fused' and prev is not None \
                    and prev[1] is not None and prev[1].startswith("the K loop's zero-trip"):
                reason = prev[1]
            reason = reason or R_OPEN
            groups.setdefault(reason, []).append(b['offset'])
            prev = (b, reason if reason != R_OPEN else None)
        for reason, offs in groups.items():
            lists.append((t, name, reason, offs))
def tglob(ts):
    return 'gfx1*' if len(ts) == 3 else ts[0] if len(ts) == 1 else None
out = ['# Blocks of the gfx code objects no CI suite executes on the ISA emulator, and why',
       '# (docs/block-coverage.md; the records are coverage/<gfx>.json, judged by tests/block_coverage.rs).',
       '#',
       '# An [[uncovered]] entry is a suppression like [[known_bad]] (the same shared keys, the same strict',
       '# judging): it fails when a block it names executes (remove it), names no block, or has expired.',
       '# `blocks` lists offsets from the entry, or is "all" for an entry no suite launches at all.',
       '']
def emit(target, entry, reason, blocks):
    reason = reason.replace('{t}', target if target != 'gfx1*' else '<gfx>')
    out.append('[[uncovered]]')
    out.append(f'target = "{target}"')
    out.append(f'entry = "{entry}"')
    out.append(f'blocks = {blocks}')
    out.append(f'reason = "{reason}"')
    out.append(f'tracking = "{TRACK}"')
    out.append(f'expires = {EXP}')
    out.append('mode = "xfail-strict"')
    out.append('')
for (entry, reason), ts in alls.items():
    g = tglob(ts)
    if g: emit(g, entry, reason, '"all"')
    else:
        for t in ts: emit(t, entry, reason, '"all"')
for t, name, reason, offs in lists:
    body = '[\n' + ''.join(f'    "{o}",\n' for o in offs) + ']' if len(offs) > 6 else '[' + ', '.join(f'"{o}"' for o in offs) + ']'
    emit(t, name, reason, body)
open(f'{root}/cases/exceptions/coverage.toml', 'w').write('\n'.join(out).rstrip() + '\n')
