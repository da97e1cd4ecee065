"""The second campaign's classes of hostile input (issue 40), run by hostile.py.

File names that are not text, outputs that are an input's file, impossible
statistics, a value twice in an axis, search's numbers and outputs, and
checkpoints that are not regular files; then the smaller items: tensor sets
larger than memory (judged by their headers), one report twice in a table,
rules files of the wrong types, empty option values, a set's dim beyond
4096, and control characters in what tables print. A case is an argv list
(refused: exit 2, one line, nothing left) or a dict that also names the
files that must not change ('keep'), folders whose listing must not change
('dirs'), the files a valid case makes ('makes') and its allowed exit
statuses ('ok'), words its line must hold ('says'), a check of what it
printed ('stdout') and a time to end within ('within').
"""
import json
import os
import shutil
import struct
import subprocess
import time
import zipfile


def npy_header(descr, shape):
    """The bytes of a version 1.0 .npy header, padded as NumPy pads it."""
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ''.join('%d, ' % d for d in shape) if len(shape) != 1 else '%d,' % shape[0])
    text += ' ' * (63 - (10 + len(text)) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(text)) + text.encode()


SIZES = {'<u2': 2, '<f2': 2, '<f4': 4, '<f8': 8}


def sparse_npy(path, descr, shape, fill=None):
    """A .npy file of `shape`, its data zeros (sparse: no disk) unless `fill` gives every value's bytes."""
    n = SIZES[descr]
    for d in shape:
        n *= d
    with open(path, 'wb') as f:
        f.write(npy_header(descr, shape))
        if fill is not None:
            f.write(fill * (n // len(fill)))
        else:
            f.truncate(f.tell() + n)


def in_ulimit(kb, argv):
    return ['sh', '-c', 'ulimit -v %d; exec "$0" "$@"' % kb] + argv


def table_lines(text):
    """What is wrong with a Markdown table as printed: a line of it that is not a row (a cell split in two)."""
    rows = [l for l in text.splitlines() if l and not l.startswith('check:') and not l.startswith('note:')]
    bad = [l for l in rows if not (l.startswith('|') and l.endswith('|'))]
    return 'a line that is no row: %r' % bad[0][:60] if bad else ''


def classes(binary, work, out_dir, out, write, report, report_cases, axis_cases, config_cases, mutate):
    def make(*argv):
        subprocess.run([binary] + list(argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def under(folder, name):
        path = os.path.join(work, folder)
        os.makedirs(path, exist_ok=True)
        return os.path.join(path, name) if name else path

    found = []
    # A tensor set as a file and as a folder of .npy files, with a path's L and INV (a candidate for score).
    one = under('sets', 'set.npz')
    make('inspect', '-a', 'family=model_like', '-a', 'chunk=8', '-a', 'dim=8', '--export', one, '--count', '4')
    folder = under('d', '')
    make('inspect', '-a', 'family=model_like', '-a', 'chunk=8', '-a', 'dim=8', '--export', folder, '--count', '4')
    cand = under('c', '')
    make('inspect', '-a', 'family=model_like', '-a', 'chunk=8', '-a', 'dim=8', '-a', 'method=neumann', '--export', cand,
         '--count', '4', '--export-path', 'emulated')
    run_small = ['-a', 'chunk=8', '--samples', '2', '--paths', 'gold,emulated', '-q']

    # 13. File names that are not UTF-8 text, or hold a newline: an input named
    # by them is refused (a report's axes hold it), an output is written.
    bad = os.fsdecode(os.path.join(os.fsencode(work), b'sets', b'bad\xff.npz'))
    nl = os.path.join(work, 'sets', 'new\nline.npz')
    for name in (bad, nl):
        shutil.copy(one, name)
    cases = []
    for name in (bad, nl, os.fsdecode(os.path.join(os.fsencode(work), b'sets', b'gone\xfe.npz'))):
        cases += [['run', '--inputs', name, '-q', '-o', out], ['inspect', '--inputs', name],
                  ['score', '--inputs', name, '--candidate', cand, '-q', '-o', out]]
    cases.append(['score', '--inputs', folder, '--candidate', os.path.join(work, 'c', 'L\nx.npy'), '-q', '-o', out])
    odd = os.fsdecode(os.path.join(os.fsencode(out_dir), b'r\xff.json'))
    shard = [os.fsdecode(os.path.join(os.fsencode(work), b's%d\xff.json' % i)) for i in (1, 2)]
    for i, s in enumerate(shard):
        make('run', *run_small, '--shard', '%d/2' % (i + 1), '-o', s)
    witness = os.fsdecode(os.path.join(os.fsencode(out_dir), b'r\xff.safetensors'))  # beside the report
    search = ['search', '-a', 'chunk=8', '-a', 'dim=8', '--budget', '200', '--restarts', '1', '-q']
    cases += [{'argv': ['run'] + run_small + ['-o', odd], 'makes': [odd]},
              {'argv': ['run'] + run_small + ['-o', nl.replace('sets', 'out').replace('.npz', '.json')],
               'makes': [nl.replace('sets', 'out').replace('.npz', '.json')]},
              {'argv': ['merge'] + shard + ['-q', '-o', odd], 'makes': [odd]},
              {'argv': ['check', shard[0], '--baseline', shard[0], '--format', 'json'], 'makes': []},
              ['check', nl.replace('.npz', '.json'), '--baseline', shard[0]],
              {'argv': search + ['-o', odd], 'makes': [odd, witness]}]
    found.append(('names not UTF-8 or with a newline: inputs refused, outputs written', cases))

    # 14. An output that is a file of an input (of a folder of .npy files too),
    # however it is spelled: refused, the input unchanged.
    members = [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
    link = os.path.join(work, 'link.npy')
    os.symlink(os.path.join(folder, 'g.npy'), link)
    hard = os.path.join(work, 'hard.npy')
    os.link(os.path.join(folder, 'beta.npy'), hard)
    keep = members + [os.path.join(cand, n) for n in os.listdir(cand)]
    cases = []
    for target in (os.path.join(folder, 'g.npy'), os.path.join(work, 'd', '..', 'd', 'keys.npy'), link, hard):
        cases.append({'argv': ['run', '--inputs', folder, '-q', '-o', target], 'keep': keep, 'dirs': [folder]})
    for target in (os.path.join(folder, 'beta.npy'), os.path.join(cand, 'L.npy'), os.path.join(cand, 'INV.npy')):
        cases.append({'argv': ['score', '--inputs', folder, '--candidate', cand, '-q', '-o', target], 'keep': keep,
                      'dirs': [folder, cand]})
    cases.append({'argv': ['inspect', '--inputs', folder, '--export', os.path.join(folder, 'g.npy')], 'keep': keep})
    found.append(("outputs that are an input's file", cases))

    # 15. Statistics no values can have, in every command that reads a report.
    def stat(r, key, value, metric='inv_total_rel_rmse', entry=1):
        r['results'][entry]['metrics'][metric][key] = value

    def swap(r, a, b, metric='inv_total_rel_rmse'):
        m = r['results'][1]['metrics'][metric]
        m[a], m[b] = m[b], m[a]

    texts = [mutate(lambda r: swap(r, 'min', 'max')), mutate(lambda r: swap(r, 'p10', 'p90')),
             mutate(lambda r: stat(r, 'median', '-inf')), mutate(lambda r: stat(r, 'min', '-inf')),
             mutate(lambda r: stat(r, 'mean', 1.5, 'inv_finite')), mutate(lambda r: stat(r, 'mean', -0.5, 'inv_finite')),
             mutate(lambda r: stat(r, 'max', 2, 'inv_finite')), mutate(lambda r: stat(r, 'mean', 'nan')),
             mutate(lambda r: stat(r, 'max', 'inf')), mutate(lambda r: stat(r, 'p99', 1e300)),
             mutate(lambda r: stat(r, 'mean', 1e300))]
    state = json.load(open(shard[0]))

    def in_state(key, value):
        s = json.loads(json.dumps(state))
        states = s['results'][1]['state']['metrics']
        states['inv_total_rel_rmse' if 'inv_total_rel_rmse' in states else next(iter(states))][key] = value
        return json.dumps(s)

    texts += [in_state('count', -1), in_state('min', 'nan'), in_state('max', 'nan'), in_state('zeros', -3),
              in_state('pos', [1049600, -1]), in_state('min', '-inf')]
    found.append(('report: statistics no values can have (min > max, p10 > p90, -inf, a share of 150%, NaN in a state)',
                  report_cases(texts)))

    # 16. A value twice in a list: refused, not run twice.
    found.append(('a value twice in an axis list', axis_cases([
        ['decay_floor=[-5,-5.0]'], ['chunk=[8,8]'], ['chunk=[16,16.0]'], ['family=[floor,floor]'],
        ['decay_floor=[-5,-4,-5]']]) + config_cases([
        '{"experiments": [{"decay_floor": [-5, -5.0]}]}', '{"experiments": [{"chunk": [8, 16, 8]}]}',
        '{"experiments": [{"family": ["floor", "model_like", "floor"]}]}'])))

    # 17. search: numbers read by the project's one parser; its two outputs
    # checked together before the search, and written together after it.
    w = os.path.join(out_dir, 'w.safetensors')
    cases = [search + ['--seed=-1', '-o', out], search + ['--seed', '18446744073709551616', '-o', out],
             search + ['--budget', '-1', '-o', out], search + ['--budget', '18446744073709551616', '-o', out],
             search + ['--budget', '1e30', '-o', out], search[:-5] + ['--budget', '4', '-q', '-o', out],
             search[:-5] + ['--budget', '50', '-q', '-o', out], search + ['--restarts', '-1', '-o', out],
             search + ['--threads', '-1', '-o', out], search + ['--population', '2.5', '-o', out],
             {'argv': search + ['-o', 'out/r.json', '--witness', './out/r.json'], 'cwd': work},
             {'argv': search + ['-o', 'out/r.json', '--witness', 'out/../out/r.json'], 'cwd': work},
             search + ['-o', '/dev/full', '--witness', w], search + ['-o', '-'],
             search + ['-o', out, '--witness', os.path.join(out_dir, 'wdir')]]
    cases += [['score', '--inputs', folder, '--candidate', cand, '--threads', t, '-q', '-o', out]
              for t in ('-1', '100000', '2.5', '1e30')]
    found.append(('search and score: numbers, a budget below one generation, outputs that collide or fail', cases))

    # 18. Checkpoints that are not regular files: refused at once, left as they are.
    long_run = ['run', '-a', 'chunk=[8,16]', '--samples', '100000', '--quantiles', 'sketch', '-q']
    cases = []
    for kind in ('fifo', 'zero', 'dir', 'state-fifo', 'state-zero'):
        for extra in (['--resume', '--dry-run'], ['--resume']):
            sub = under('ck-%s-%d' % (kind, len(extra)), '')
            argv = long_run + ['-o', os.path.join(sub, 'r.json')]
            ckpt = os.path.join(sub, 'r.json.ckpt')
            target = ckpt
            if kind.startswith('state'):  # a real checkpoint (killed once it is there), its state replaced
                target = ckpt + '.state'
                p = subprocess.Popen([binary] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                while p.poll() is None and not (os.path.exists(ckpt) and os.path.getsize(ckpt) > 0):
                    time.sleep(0.01)
                p.kill()
                p.wait()
                if os.path.lexists(target):
                    os.remove(target)
            if kind.endswith('fifo'):
                os.mkfifo(target)
            elif kind.endswith('zero'):
                os.symlink('/dev/zero', target)
            else:
                os.mkdir(target)
            cases.append({'argv': argv + extra, 'keep': [target, ckpt], 'dirs': [sub]})
    found.append(('checkpoints that are not regular files (a FIFO, /dev/zero, a folder; also as the saved state)',
                  cases))

    # 19. Tensor sets larger than the memory there is, judged by their headers
    # before any data is read: one line naming the set and the limit, at once.
    # A 3 GiB set (sparse: no disk) as .npy files and as .safetensors; a
    # 128 MiB .npz stored and a 512 MiB one deflated (its headers inflated,
    # not its data); each under an address-space limit. A small set still runs.
    n_big = 786432  # keys [N, 16, 128] BF16 bits: 3 GiB
    big = under('big', '')
    sparse_npy(os.path.join(big, 'keys.npy'), '<u2', (n_big, 16, 128))
    for name in ('g', 'beta'):
        sparse_npy(os.path.join(big, name + '.npy'), '<f4', (n_big, 16))
    header = {'keys': {'dtype': 'BF16', 'shape': [n_big, 16, 128], 'data_offsets': [0, n_big * 16 * 128 * 2]}}
    at = n_big * 16 * 128 * 2
    for name in ('g', 'beta'):
        header[name] = {'dtype': 'F32', 'shape': [n_big, 16], 'data_offsets': [at, at + n_big * 16 * 4]}
        at += n_big * 16 * 4
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    big_st = os.path.join(work, 'big', 'big.safetensors')
    with open(big_st, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text)
        f.truncate(f.tell() + at)

    def npz(path, n, method):
        with zipfile.ZipFile(path, 'w', method, allowZip64=True) as z:
            for name, descr, shape, fill in (('keys', '<u2', (n, 16, 128), b'\x80\x3f'), ('g', '<f4', (n, 16), None),
                                              ('beta', '<f4', (n, 16), struct.pack('<f', 0.5))):
                size = SIZES[descr]
                for d in shape:
                    size *= d
                with z.open(name + '.npy', 'w', force_zip64=True) as m:
                    m.write(npy_header(descr, shape))
                    block = (fill or b'\0' * SIZES[descr]) * (1 << 20)
                    for at in range(0, size, len(block)):
                        m.write(block[:size - at])
    stored = os.path.join(work, 'big', 'stored.npz')
    npz(stored, 32768, zipfile.ZIP_STORED)
    deflated = os.path.join(work, 'big', 'deflated.npz')
    npz(deflated, 131072, zipfile.ZIP_DEFLATED)
    small = os.path.join(work, 'big', 'small.npz')
    npz(small, 1024, zipfile.ZIP_STORED)
    cases = []
    for sets, kb in (((big, big_st), 8000000), ((stored,), 1000000), ((deflated,), 2000000)):
        for s in sets:
            for argv in (['run', '--inputs', s, '-q', '-o', out], ['inspect', '--inputs', s, '--brief'],
                         ['score', '--inputs', s, '--candidate', cand, '-q', '-o', out]):
                cases.append({'argv': in_ulimit(kb, [binary] + argv), 'says': [s, 'this process may use', 'ulimit -v'],
                              'within': 10})
    cases.append({'argv': in_ulimit(1000000, [binary, 'run', '--inputs', small, '--samples', '4', '-q', '-o', out]),
                  'makes': [out]})
    found.append(('tensor sets larger than memory, by their headers (3 GiB sparse .npy and .safetensors, a .npz stored '
                  'and deflated, under ulimit -v)', cases))

    # 20. One report twice in a table, however spelled: refused; a copy under
    # another name is two reports, told apart by the report column.
    b = os.path.join(work, 'base.json')  # hostile.py's valid report
    os.symlink(b, os.path.join(work, 'base-link.json'))
    os.link(b, os.path.join(work, 'base-hard.json'))
    shutil.copy(b, os.path.join(work, 'base-copy.json'))
    os.makedirs(os.path.join(work, 'x'), exist_ok=True)
    cases = [['table', b, b], {'argv': ['table', 'base.json', './base.json'], 'cwd': work, 'says': ['./base.json']},
             ['table', b, os.path.join(work, 'base-link.json')], ['table', b, os.path.join(work, 'base-hard.json')],
             ['table', b, os.path.join(work, 'x', '..', 'base.json'), '-o', out],
             {'argv': ['table', b, os.path.join(work, 'base-copy.json')], 'makes': [],
              'stdout': lambda t: '' if 'base-copy.json' in t and '| report' in t else 'no report column'}]
    found.append(('one report twice in a table (the same name, ./, a link, a hard link, x/..)', cases))

    # 21. Rules files whose values are of the wrong type: one line naming the
    # file, the key and what it must be (was: nlohmann's type_error text).
    cases = []
    for i, (text, key) in enumerate((('{"defaults": "yes"}', '"defaults"'), ('{"defaults": 1}', '"defaults"'),
                                     ('{"defaults": null}', '"defaults"'), ('{"confidence": "0.9"}', '"confidence"'),
                                     ('{"mode": 5}', '"mode"'), ('{"missing_in_new": true}', '"missing_in_new"'),
                                     ('{"description": 5}', '"description"'), ('{"rules": {}}', '"rules"'),
                                     ('{"rules": [{"metric": 5}]}', '"metric"'),
                                     ('{"rules": [{"metric": "l_rel_rmse", "tolerance": "a"}]}', '"tolerance"'),
                                     ('{"rules": [{"metric": "l_rel_rmse", "absolute": [1]}]}', '"absolute"'),
                                     ('{"rules": [{"metric": "l_rel_rmse", "statistic": 1}]}', '"statistic"'),
                                     ('{"rules": [{"metric": "l_rel_rmse", "check": 2}]}', '"check"'))):
        rules = write('rules%d.json' % i, text)
        cases.append({'argv': ['check', b, '--baseline', b, '--rules', rules], 'says': [rules, key, 'must']})
    found.append(('rules files with values of the wrong type', cases))

    # 22. Empty option values (was: `inspect --paths ''` taken as every path).
    cases = [{'argv': argv, 'says': [says]} for argv, says in (
        (['inspect', '-a', 'chunk=8', '--paths', '', '--brief'], '--paths'),
        (['run', '-a', 'chunk=8', '--samples', '2', '--paths', '', '-q', '-o', out], '--paths'),
        (['score', '--inputs', folder, '--candidate', cand, '--paths', '', '-q', '-o', out], '--paths'),
        (['bench', '-a', 'chunk=8', '--paths', ''], '--paths'), (['seq', '--paths', '', '-q', '-o', out], '--paths'),
        (['search', '-a', 'chunk=8', '--path', '', '-q', '-o', out], '--path'),
        (['run', '-a', 'chunk=8', '--samples', '', '-q', '-o', out], '--samples'),
        (['run', '-a', 'chunk=8', '--seed', '', '-q', '-o', out], '--seed'),
        (['run', '-a', 'chunk=8', '--samples', '2', '-q', '-o', ''], '-o'), (['table', b, '-o', ''], '-o'),
        (['check', b, '--baseline', b, '--rules', ''], '--rules'), (['run', '-a', '', '-q', '-o', out], '-a'))]
    found.append(("empty option values (`--paths ''`, `-o ''`, `--samples ''`, ...)", cases))

    # 23. A tensor set whose dim is beyond 4096: refused naming the file and the tensor.
    wide = under('wide', '')
    sparse_npy(os.path.join(wide, 'keys.npy'), '<f4', (2, 8, 4097), struct.pack('<f', 0.5))
    sparse_npy(os.path.join(wide, 'g.npy'), '<f4', (2, 8), struct.pack('<f', -1.0))
    sparse_npy(os.path.join(wide, 'beta.npy'), '<f4', (2, 8), struct.pack('<f', 0.5))
    wide_tok = under('wide-tokens', '')
    sparse_npy(os.path.join(wide_tok, 'keys.npy'), '<f4', (1, 16, 1, 5000), struct.pack('<f', 0.5))
    sparse_npy(os.path.join(wide_tok, 'g.npy'), '<f4', (1, 16, 1), struct.pack('<f', -1.0))
    sparse_npy(os.path.join(wide_tok, 'beta.npy'), '<f4', (1, 16, 1), struct.pack('<f', 0.5))
    cases = []
    for d, dim in ((wide, '4097'), (wide_tok, '5000')):
        keys = os.path.join(d, 'keys.npy')
        cases += [{'argv': ['run', '--inputs', d, '-q', '-o', out], 'says': [keys, dim]},
                  {'argv': ['inspect', '--inputs', d, '--brief'], 'says': [keys, dim]},
                  {'argv': ['score', '--inputs', d, '--candidate', cand, '-q', '-o', out], 'says': [keys, dim]}]
    found.append(('a tensor set with dim beyond 4096 (chunks and tokens layouts)', cases))

    # 24. Control characters in what tables and lists print: an axis value
    # with a newline (a report edited by hand) stays in its row; a name with
    # one in `run --dry-run`'s lines stays in its line.
    nl_report = json.loads(json.dumps(report))
    for i, e in enumerate(nl_report['results']):
        e['axes']['note'] = 'new\nline' if i % 2 else 'tab\there\r'
    nl_path = write('nl.json', json.dumps(nl_report))
    one_line = lambda t: '' if all(not l.startswith('line') for l in t.splitlines()) else 'a name split over two lines'
    cases = [{'argv': ['check', nl_path, '--baseline', nl_path], 'makes': [], 'stdout': table_lines},
             {'argv': ['check', nl_path, '--baseline', nl_path, '--changes-only'], 'makes': [], 'stdout': table_lines},
             {'argv': ['table', nl_path], 'makes': [], 'stdout': table_lines},
             {'argv': ['table', nl_path, '--columns', 'chunk'], 'makes': [], 'stdout': table_lines},
             {'argv': ['table', nl_path, '--format', 'csv'], 'makes': [],
              'stdout': lambda t: '' if len(t.splitlines()) > 1 and len({l.count(',') for l in t.splitlines()}) == 1
              else 'a row split in two'},
             {'argv': ['table', nl_path, '--worst', '2'], 'makes': [],
              'stdout': lambda t: '' if all(l.startswith(('|', '  ', 'floor', 'weak')) or not l
                                            for l in t.splitlines()) else 'a worst-sample line split'},
             {'argv': ['run', '-a', 'chunk=8', '--samples', '2', '--dry-run', '-o',
                       os.path.join(out_dir, 'new\nline.json')], 'makes': [], 'stdout': one_line}]
    found.append(('control characters in table cells, worst lists and printed names (md, csv, check)', cases))
    return found
