#!/usr/bin/env python3
"""Hostile configs, axes and reports through the built binary, by class.

Every case must end with exit status 2, exactly one line on stderr that
starts "chunkinv: ", no report and no temporary file left beside it, within
TIMEOUT seconds (a hang is a failure). Some cases are valid and must run
(exit 0, or 1 from check) and make exactly the files they name. A case may
also name files that must not change (inputs) and folders whose listing
must not change, words its one line must hold ('says'), a check of what
it printed ('stdout': a function of the text, giving what is wrong or '')
and a time it must end within ('within', seconds). Prints one row per class: cases tried, cases that
behaved, and the first misbehaviour.

    python3 tests/fuzz/hostile.py build/chunkinv
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TIMEOUT = 60


def nested(depth, inner='16'):
    return '[' * depth + inner + ']' * depth


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else 'build/chunkinv')
    work = tempfile.mkdtemp(prefix='chunkinv-hostile-')
    out_dir = os.path.join(work, 'out')
    os.mkdir(out_dir)
    out = os.path.join(out_dir, 'r.json')

    def write(name, data):
        path = os.path.join(work, name)
        with open(path, 'wb') as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    # A valid report to start from (and the baseline of `check`).
    base = os.path.join(work, 'base.json')
    subprocess.run([binary, 'run', '-a', 'family=[floor,weak_decay_correlated]', '-a', 'chunk=[8,16]', '--samples', '4',
                    '--per-sample', '--paths', 'gold,emulated', '-q', '-o', base], check=True, stdout=subprocess.DEVNULL)
    report = json.load(open(base))
    classes = []  # (name, [argv lists])

    def config_cases(texts):
        return [['run', write('c%d.json' % i, t), '--samples', '1', '-q', '-o', out] for i, t in enumerate(texts)]

    def axis_cases(axes_lists):
        cases = []
        for axes in axes_lists:
            argv = ['run', '--samples', '1', '-q', '-o', out]
            for a in axes:
                argv += ['-a', a]
            cases.append(argv)
        return cases

    counter = [0]

    def report_cases(texts):
        cases = []
        for t in texts:
            counter[0] += 1
            p = write('r%d.json' % counter[0], t)
            cases += [['table', p, '-o', out], ['check', p, '--baseline', base], ['check', base, '--baseline', p]]
        return cases

    def mutate(f):
        r = json.loads(json.dumps(report))
        f(r)
        return json.dumps(r)

    grid = '"experiments": [{"family": "floor", "chunk": 16}]'
    # 1. Deep nesting in configs.
    texts = []
    for d in (65, 1000, 100000, 1000000):
        texts += ['{"experiments": [{"chunk": %s}]}' % nested(d),
                  '{"experiments": [{"decay_floor": %s}]}' % nested(d, '-5'),
                  '{"tabel": %s, %s}' % (nested(d), grid),
                  '{"name": %s, %s}' % ('{"a": ' * d + '1' + '}' * d, grid)]
    classes.append(('config: JSON nested deeper than 64', config_cases(texts)))
    # 2. Deep nesting in reports (meta, axis values, unknown keys, statistics).
    texts = []
    for d in (65, 1000, 100000, 1000000):
        deep = nested(d)
        texts += [mutate(lambda r: r.update(meta=None)).replace('"meta": null', '"meta": ' + deep),
                  json.dumps(report).replace('"chunk": 8', '"chunk": ' + deep, 1),
                  json.dumps(report).replace('"meta": {', '"table": %s, "meta": {' % deep, 1),
                  json.dumps(report).replace('"median": ', '"median": %s, "x": ' % deep, 1)]
    classes.append(('report: JSON nested deeper than 64', report_cases(texts)))
    # 3. Sizes and kinds of file.
    big_cfg = write('big.json', '{"experiments": [{"chunk": [16')
    os.truncate(big_cfg, 200 << 20)
    big_rep = write('big_report.json', json.dumps(report)[:-2])
    os.truncate(big_rep, (2 << 30) + 1)
    classes.append(('files: too large, a directory, a device, missing', [
        ['run', big_cfg, '-q', '-o', out], ['run', '/dev/zero', '-q', '-o', out], ['run', work, '-q', '-o', out],
        ['table', big_rep], ['table', '/dev/zero'], ['table', work], ['table', os.path.join(work, 'none.json')],
        ['check', big_rep, '--baseline', base], ['check', base, '--baseline', work],
        ['check', base, '--baseline', base, '--rules', work], ['check', base, '--baseline', base, '--rules', '/dev/zero']]))
    # 4. Integers from JSON.
    texts = []
    for v in ('1e300', '1e20', '18446744073709551632', '4294967312', '16.5', '-16', '"16"', 'null', 'true'):
        texts += ['{"experiments": [{"chunk": %s}]}' % v, '{"experiments": [{"dim": %s}]}' % v]
    for v in ('-1', '1.5', '1e30', '18446744073709551616', '"0"', 'null'):
        texts.append('{"seed": %s, %s}' % (v, grid))
    # (1e12 is a whole number in range, 10^15 + 1 is one past the largest.)
    for v in ('-1', '0', '2.7', '1000000000000001', '1e16', '18446744073709551616', '1e30', '"5"'):
        texts.append('{"samples": %s, %s}' % (v, grid))
    classes.append(('config: chunk, dim, seed, samples not exact integers in range', config_cases(texts)))
    # 5. Types and shape of a config.
    texts = ['{"name": %s, %s}' % (v, grid) for v in ('5', 'null', '{}', '["x"]')]
    texts += ['{"description": 1, %s}' % grid, '{"paths": "gold", %s}' % grid, '{"paths": [], %s}' % grid,
              '{"paths": [1], %s}' % grid, '{"experiments": {}}', '{"experiments": []}', '{"experiments": [1]}',
              '{}', '[]', '5', '', '{"experiments": [{"family": 5}]}', '{"experiments": [{"chunk": [[16]]}]}',
              '{"experiments": [{"chunk": {"a": 1}}]}', '{"experiments": [{"family": []}]}',
              '{"experiments": [{"chunk": []}]}', '{"sample": 5, %s}' % grid]
    classes.append(('config: wrong types, shapes, empty lists, unknown keys', config_cases(texts)))
    # 6. Strict JSON in configs.
    texts = ['{"seed": 1, "seed": 2, %s}' % grid, '{"experiments": [{"chunk": 8, "chunk": 16}]}',
             b'{"experiments": [{}]}\x00garbage', '{"experiments": [{}]} {}', '{"experiments": [{}]}x',
             '{"experiments": [{}]', '{"experiments": [{"family": "fl\x00or"}]}']
    classes.append(('config: duplicate keys, bytes after the JSON, NUL', config_cases(texts)))
    # 7. Axis grammar.
    axes = [[a] for a in ('chunk=[32', 'chunk=[16,', 'chunk=[16,]', 'chunk=[,16]', 'chunk=[]', 'chunk=[ ]', 'family=[]',
                          'chunk=[8:16:8:5]', 'chunk=[8abc:16xyz:8q]', 'chunk=[8:]', 'chunk=[:8]', 'decay_floor=[-inf:-1]',
                          'decay_floor=[nan:1]', 'chunk=[16:8:1]', 'chunk=[8:16:0]', 'chunk=[[16]]', 'chunk=[16]]',
                          'chunk={"a": 1}', 'chunk="16', 'chunk=', 'model=\udcff', 'chunk=4294967312',
                          'dim=4294967312', 'chunk=1e300', 'chunk=18446744073709551632', 'chunk=16,32', 'chunks=16',
                          '=16', 'chunk')]
    classes.append(('-a: grammar, integers', axis_cases(axes)))
    # 8. Sizes of grids and ranges.
    floors = ','.join(str(-i) for i in range(1, 200001))
    # One argument holds at most 128 KiB (Linux's MAX_ARG_STRLEN): 15000
    # values (94 KB) times 63 chunks.
    arg_floors = ','.join(str(-i) for i in range(1, 15001))
    lst = ','.join(str(-i) for i in range(1, 1001))
    classes.append(('grid and range sizes', axis_cases([
        ['chunk=[2:64]', 'dim=[1:4096]', 'decay_floor=[-20:-1]'],
        ['decay_floor=[-100000:-1]', 'chunk=[8,16,32]', 'family=[floor,model_like]'],
        ['chunk=[1:1e9]'], ['decay_floor=[-1e308:1e308:1e-300]'], ['decay_floor=[%s]' % arg_floors, 'chunk=[2:64]']]) +
        config_cases([
        '{"experiments": [{"family": ["floor", "model_like"], "chunk": [%s], "dim": [%s], "decay_floor": [%s]}]}'
        % (lst, lst, lst),
        '{"experiments": [{"decay_floor": [%s]}]}' % floors])))
    # 9. Axes no family of the grid (or run) takes; a run of nothing.
    classes.append(('axes no family takes; nothing to run', config_cases([
        '{"experiments": [{"family": "model_like", "log_decay": -0.1}]}',
        '{"experiments": [{"family": ["floor", "model_like"], "beta": 0.5}]}']) + axis_cases([
        ['log_decay=-0.1'], ['family=model_like', 'beta=0.5'], []])))
    # 10. Impossible values in reports.
    def stat(r, key, value, metric='inv_total_rel_rmse', entry=1):
        r['results'][entry]['metrics'][metric][key] = value
    texts = []
    for v in ('nan', 1e30, -5, 3.7, 5, 2 ** 64, None, '3'):
        texts.append(mutate(lambda r: stat(r, 'finite_count', v)))
    for v in (-1, 2.5, 0, 1e30, '4', 1e16):
        texts.append(mutate(lambda r: r['results'][1].update(samples=v)))
    for v in (-1, 1e30, 1.5):
        texts.append(mutate(lambda r: r['results'][1].update(seed=v)))
    texts += [mutate(lambda r: stat(r, 'median', 'nan')), mutate(lambda r: stat(r, 'median', 'NaN')),
              mutate(lambda r: stat(r, 'p10', [1])), mutate(lambda r: r['results'][1]['metrics']['inv_total_rel_rmse'].pop('min')),
              mutate(lambda r: stat(r, 'wilson_low', 2, 'inv_finite')),
              mutate(lambda r: r['results'][1]['per_sample']['l_rel_rmse'].pop()),
              mutate(lambda r: r['results'][1]['per_sample']['l_rel_rmse'].__setitem__(0, 'nan')),
              mutate(lambda r: r['results'].append(r['results'][1])),
              mutate(lambda r: r['results'].append(dict(r['results'][1], axes=dict(r['results'][1]['axes'],
                                                                                    chunk=float(r['results'][1]['axes']['chunk'])))))]
    for v in (2, None, {}, ['chunkinv.report/2']):
        texts.append(mutate(lambda r: r.update(schema=v)))
    texts += [mutate(lambda r: r.pop('schema')), mutate(lambda r: r.update(meta=7)),
              mutate(lambda r: r['results'][1]['axes'].update(path=7)),
              mutate(lambda r: r['results'][1]['axes'].update(decay_floor=[-5])), mutate(lambda r: r.update(results={})),
              mutate(lambda r: r['results'].insert(0, 7))]
    classes.append(('report: impossible counts and statistics, duplicates, schema, shape', report_cases(texts)))
    # 11. Strict JSON in reports.
    text = json.dumps(report)
    classes.append(('report: duplicate keys, bytes after the JSON, NUL', report_cases([
        text.replace('"meta": {', '"meta": {}, "meta": {', 1), text.encode() + b'\x00garbage', text + ' {}', text + ']',
        text[:-5], ''])))
    # 12. Threads that cannot be created (an address-space limit).
    limited = ['sh', '-c', 'ulimit -v 3000000; exec "$0" "$@"', binary, 'run', '-a', 'chunk=16', '--samples', '10',
               '--threads', '1000', '-q', '-o', out]
    classes.append(('--threads 1000 under ulimit -v 3 GB', [limited]))

    # 13-19: the second campaign (issue 40).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hostile_more
    classes += hostile_more.classes(binary, work, out_dir, out, write, report, report_cases, axis_cases, config_cases,
                                    mutate)

    print('| case class | cases tried | outcome |')
    print('|---|---:|---|')
    total = bad_total = 0
    for name, cases in classes:
        bad = []
        slowest = 0.0
        for case in cases:
            c = case if isinstance(case, dict) else {'argv': case}
            argv = c['argv']
            keep = {k: digest(k) for k in c.get('keep', [])}
            dirs = {d: sorted(os.listdir(d)) for d in c.get('dirs', [])}
            full = argv if argv[0] == 'sh' else [binary] + argv
            t0 = time.time()
            printed = ''
            try:
                p = subprocess.run(full, stdout=subprocess.PIPE if 'stdout' in c else subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=TIMEOUT, cwd=c.get('cwd'))
                status, err = p.returncode, p.stderr.decode(errors='replace')
                printed = p.stdout.decode(errors='replace') if 'stdout' in c else ''
            except subprocess.TimeoutExpired:
                status, err = 'hang', ''
            took = time.time() - t0
            slowest = max(slowest, took)
            lines = err.splitlines()
            left = sorted(os.listdir(out_dir))
            made = sorted(os.path.basename(m) for m in c.get('makes', []))
            changed = [k for k, h in keep.items() if digest(k) != h] + [d for d, l in dirs.items()
                                                                       if sorted(os.listdir(d)) != l]
            if 'makes' in c:
                wrong = status not in c.get('ok', (0,)) or left != made or changed
            else:
                wrong = status != 2 or len(lines) != 1 or not lines[0].startswith('chunkinv: ') or left or changed
            missing = [w for w in c.get('says', []) if not lines or w not in lines[0]]
            misprinted = c['stdout'](printed) if 'stdout' in c else ''
            slow = 'within' in c and took > c['within']
            if wrong or missing or misprinted or slow:
                bad.append('%s: exit %s, %d lines: %s%s%s%s%s%s' % (
                    ' '.join(str(a)[:40] for a in argv[:5]), status, len(lines), (lines[0][:100] if lines else ''),
                    ', left ' + ','.join(left) if left != made else '', ', changed ' + ','.join(changed) if changed else '',
                    ', not saying ' + repr(missing) if missing else '', ', printed ' + misprinted if misprinted else '',
                    ', took %.1f s' % took if slow else ''))
            for f in left:
                path = os.path.join(out_dir, f)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
        total += len(cases)
        bad_total += len(bad)
        outcome = ('as required, no file left or changed (slowest %.1f s)' % slowest if not bad
                   else '%d misbehaved; first: %s' % (len(bad), bad[0]))
        print('| %s | %d | %s |' % (name, len(cases), outcome))
    print('\n%d cases, %d misbehaved' % (total, bad_total))
    shutil.rmtree(work)
    return 1 if bad_total else 0


def digest(path):
    """What a file holds (or what a FIFO, link or folder is), to see that it did not change."""
    if os.path.islink(path):
        return 'link ' + os.readlink(path)
    if not os.path.exists(path):
        return 'missing'
    if not os.path.isfile(path):
        return 'kind %o' % os.stat(path).st_mode
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


if __name__ == '__main__':
    sys.exit(main())
