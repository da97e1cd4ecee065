"""The second campaign's classes of hostile input (issue 40), run by hostile.py.

File names that are not text, outputs that are an input's file, impossible
statistics, a value twice in an axis, search's numbers and outputs, and
checkpoints that are not regular files. A case is an argv list (refused:
exit 2, one line, nothing left) or a dict that also names the files that
must not change ('keep'), folders whose listing must not change ('dirs'),
the files a valid case makes ('makes') and its allowed exit statuses ('ok').
"""
import json
import os
import shutil
import subprocess
import time


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
    return found
