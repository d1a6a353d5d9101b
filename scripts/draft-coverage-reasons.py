#!/usr/bin/env python3
# Drafts cases/exceptions/coverage.toml from the records coverage/<gfx>.json (usage: scripts/draft-coverage-reasons.py gfx1100 gfx1151 gfx1201):
# entries no CI suite launches and tile rungs as blocks = "all", alignment padding, and the rest of each launched
# entry as "not yet triaged" offset lists. A draft for review: replace generic reasons with specific ones.
import json, re, sys, collections
import os
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
targets = sys.argv[1:]
EXP = '2027-06-30'
TRACK = 'issue 31 (machine-code coverage)'
R_SUITES = ("entries no CI suite launches on this target: the suites the ISA emulator runs in CI "
            "(smoke, checkpoints, kernels, edges, selection) include neither `moe` nor `carrier`")
R_NOT_IN_TABLE = "a rung the target's tile table never selects (snapshots/selection_tiles@{t}.snap)"
R_IN_TABLE = ("a rung of the target's tile table that no CI case selects within the ISA emulator's budget (the cases run take other rungs; snapshots/selection_tiles@{t}.snap)")
R_PLAIN = "the untiled entry point (64x64 tile): selection for the AMD targets always launches a tile-table rung"
R_PAD = ("alignment padding after the entry's last s_endpgm (s_nop fill up to the next function): "
         "never meant to run")
R_OPEN = ("blocks no CI case reaches on the ISA emulator, not yet triaged block by block: each one's "
          "source line and first instructions are in coverage/{t}.md")
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
        unc = e['uncovered']
        if not unc: continue
        last = max(unc, key=lambda b: int(b['offset'][3:], 16)) if unc else None
        pad = [b for b in unc if b is last and all(i.startswith('s_nop') for i in b['first'])
               and b['offset'] == last['offset']]
        # the padding block is the entry's last block
        pad = [b for b in pad if int(b['offset'][3:],16) + 4*b['instructions'] >= 0]
        rest = [b for b in unc if b not in pad]
        if pad: lists.append((t, name, R_PAD, [b['offset'] for b in pad]))
        if rest: lists.append((t, name, R_OPEN, [b['offset'] for b in rest]))
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
