# Copyright: llmfleet maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Concurrency sweep of a served model with the engine's own benchmark, to CSV and PNG.

  bench_serve_sweep.py sweep --base-url http://HOST:8000 --model PATH_OR_ID --served-model-name NAME \
      [--concurrency 1,2,4,8,16,32] [--input-len 256] [--output-len 128] [--prompts-per-level 8] \
      [--min-prompts 16] [--vllm /opt/llmfleet/venvs/current/bin/vllm | --inproc] --out-dir DIR
  bench_serve_sweep.py plot CSV [CSV ...] [--labels A,B] --out PNG [--title T]
  bench_serve_sweep.py ab --base-url URL_A --base-url-b URL_B --labels A,B [--blocks 4] ... --out-dir DIR

`sweep` runs `vllm bench serve` (random dataset, fixed input/output lengths, --ignore-eos,
request rate unbounded, one --max-concurrency per level) against an OpenAI-compatible
endpoint and writes DIR/sweep.csv (one row per level: output tok/s, total tok/s, req/s, TTFT
mean/p50/p99, TPOT p50/p99, E2E p50/p99, completed/failed) plus each level's raw JSON.
`--inproc` calls the same benchmark (vllm.benchmarks.serve) inside this interpreter, saving
one engine import per level. `plot` draws output tok/s and TTFT p50/p99 against concurrency;
given two or more CSVs it overlays them (comparison: before/after an upgrade, collection vs
by-hand). Plotting needs matplotlib; the sweep needs only vLLM.

`ab` compares two endpoints serving the same model in one run: per block and level it runs A, B,
B, A (ABBA, so a drift of the host during the run cancels out), appends every run to DIR/ab.csv as
it goes, and writes DIR/ab-summary.txt: per level the median of the blocks' A/B output-throughput
ratios (each block's ratio = mean of its two A runs / mean of its two B runs), and their
geometric mean over the levels.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

FIELDS = ['concurrency', 'num_prompts', 'completed', 'failed', 'duration_s', 'request_throughput',
          'output_throughput', 'total_token_throughput', 'mean_ttft_ms', 'p50_ttft_ms', 'p99_ttft_ms',
          'p50_tpot_ms', 'p99_tpot_ms', 'p50_itl_ms', 'p99_itl_ms', 'p50_e2el_ms', 'p99_e2el_ms',
          'input_len', 'output_len']


def bench_args(a, conc, prompts, result_name):
    args = ['--backend', 'openai', '--base-url', a.base_url, '--endpoint', '/v1/completions',
            '--model', a.model, '--served-model-name', a.served_model_name,
            '--dataset-name', 'random', '--random-input-len', str(a.input_len),
            '--random-output-len', str(a.output_len), '--random-range-ratio', '0',
            '--num-prompts', str(prompts), '--max-concurrency', str(conc), '--request-rate', 'inf',
            '--ignore-eos', '--seed', str(a.seed),
            '--percentile-metrics', 'ttft,tpot,itl,e2el', '--metric-percentiles', '50,99',
            '--save-result', '--result-dir', a.out_dir, '--result-filename', result_name]
    if a.tokenizer:
        args += ['--tokenizer', a.tokenizer]
    if a.num_warmups:
        args += ['--num-warmups', str(a.num_warmups)]
    return args


def run_level(a, conc, prompts):
    name = 'level-c%03d.json' % conc
    args = bench_args(a, conc, prompts, name)
    t0 = time.time()
    if a.inproc:
        from vllm.benchmarks import serve as vbench  # the code behind `vllm bench serve`
        parser = argparse.ArgumentParser()
        vbench.add_cli_args(parser)
        result = vbench.main(parser.parse_args(args))
    else:
        cmd = [a.vllm, 'bench', 'serve'] + args
        print('+ ' + ' '.join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(os.path.join(a.out_dir, name)) as f:
            result = json.load(f)
    result['_wall_s'] = round(time.time() - t0, 1)
    return result


def row_of(result, conc, a):
    def g(key):
        value = result.get(key)
        return round(value, 3) if isinstance(value, float) else value
    failed = result.get('failed')
    if failed is None and result.get('num_prompts') is not None and result.get('completed') is not None:
        failed = result['num_prompts'] - result['completed']
    return {'concurrency': conc, 'num_prompts': result.get('num_prompts'), 'completed': g('completed'),
            'failed': failed, 'duration_s': g('duration'), 'request_throughput': g('request_throughput'),
            'output_throughput': g('output_throughput'), 'total_token_throughput': g('total_token_throughput'),
            'mean_ttft_ms': g('mean_ttft_ms'), 'p50_ttft_ms': g('p50_ttft_ms') or g('median_ttft_ms'),
            'p99_ttft_ms': g('p99_ttft_ms'), 'p50_tpot_ms': g('p50_tpot_ms') or g('median_tpot_ms'),
            'p99_tpot_ms': g('p99_tpot_ms'), 'p50_itl_ms': g('p50_itl_ms') or g('median_itl_ms'),
            'p99_itl_ms': g('p99_itl_ms'), 'p50_e2el_ms': g('p50_e2el_ms') or g('median_e2el_ms'),
            'p99_e2el_ms': g('p99_e2el_ms'), 'input_len': a.input_len, 'output_len': a.output_len}


def sweep(a):
    os.makedirs(a.out_dir, exist_ok=True)
    rows = []
    for conc in [int(c) for c in a.concurrency.split(',')]:
        prompts = max(a.min_prompts, conc * a.prompts_per_level)
        result = run_level(a, conc, prompts)
        row = row_of(result, conc, a)
        rows.append(row)
        print('concurrency %3d: %8.1f output tok/s, TTFT p50 %.1f ms p99 %.1f ms (%s/%s ok, %.1f s)'
              % (conc, row['output_throughput'] or 0, row['p50_ttft_ms'] or 0, row['p99_ttft_ms'] or 0,
                 row['completed'], prompts, result['_wall_s']), flush=True)
        if not row['completed']:
            raise SystemExit('no request completed at concurrency %d' % conc)
    path = os.path.join(a.out_dir, a.csv_name)
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print('wrote %s' % path)
    if a.plot:
        plot_csvs([path], [a.label], os.path.join(a.out_dir, os.path.splitext(a.csv_name)[0] + '.png'),
                  a.title or a.label)


AB_FIELDS = ['block', 'order', 'label', 'concurrency', 'output_throughput', 'p50_ttft_ms', 'p99_ttft_ms',
             'completed', 'failed', 'duration_s']


def ab_summary(rows, labels):
    """Per level: the median over blocks of mean(A runs) / mean(B runs); and their geometric mean."""
    from statistics import median
    a_label, b_label = labels
    per_level = {}
    for conc in sorted({int(r['concurrency']) for r in rows}):
        ratios = []
        for block in sorted({int(r['block']) for r in rows}):
            runs = [r for r in rows if int(r['block']) == block and int(r['concurrency']) == conc]
            a = [float(r['output_throughput']) for r in runs if r['label'] == a_label]
            b = [float(r['output_throughput']) for r in runs if r['label'] == b_label]
            if a and b and min(b) > 0:
                ratios.append((sum(a) / len(a)) / (sum(b) / len(b)))
        if ratios:
            per_level[conc] = {'blocks': len(ratios), 'median': median(ratios), 'min': min(ratios), 'max': max(ratios)}
    if not per_level:
        return per_level, None
    geo = math.exp(sum(math.log(v['median']) for v in per_level.values()) / len(per_level))
    return per_level, geo


def ab_report(per_level, geo, labels):
    lines = ['%s / %s output throughput, median over ABBA blocks' % tuple(labels)]
    for conc, v in per_level.items():
        lines.append('concurrency %3d: ratio %.3f (blocks %d, min %.3f, max %.3f)'
                     % (conc, v['median'], v['blocks'], v['min'], v['max']))
    if geo is not None:
        lines.append('geometric mean over levels: %.3f' % geo)
    return '\n'.join(lines) + '\n'


def ab(a):
    os.makedirs(a.out_dir, exist_ok=True)
    labels = a.labels.split(',')
    if len(labels) != 2:
        raise SystemExit('--labels needs two labels: A,B')
    urls = dict(zip(labels, (a.base_url, a.base_url_b)))
    path = os.path.join(a.out_dir, 'ab.csv')
    rows = []
    with open(path, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=AB_FIELDS, lineterminator="\n")
        w.writeheader()
        for block in range(1, a.blocks + 1):
            for conc in [int(c) for c in a.concurrency.split(',')]:
                prompts = max(a.min_prompts, conc * a.prompts_per_level)
                for order, label in enumerate((labels[0], labels[1], labels[1], labels[0]), 1):
                    a.base_url = urls[label]
                    result = run_level(a, conc, prompts)
                    row = row_of(result, conc, a)
                    rows.append(dict({k: row[k] for k in AB_FIELDS if k in row}, block=block, order=order, label=label))
                    w.writerow(rows[-1])
                    f.flush()
                    print('block %d concurrency %3d %-12s %8.1f output tok/s' % (block, conc, label, row['output_throughput'] or 0),
                          flush=True)
            with open(os.path.join(a.out_dir, 'ab-summary.txt'), 'w') as s:
                s.write(ab_report(*ab_summary(rows, labels), labels))
    print(open(os.path.join(a.out_dir, 'ab-summary.txt')).read(), end='')


def read_csv(path):
    with open(path) as f:
        return [{k: (float(v) if v not in ('', 'None') else None) for k, v in r.items()} for r in csv.DictReader(f)]


def plot_csvs(paths, labels, out, title=''):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, (path, label) in enumerate(zip(paths, labels)):
        rows = read_csv(path)
        x = [r['concurrency'] for r in rows]
        color = 'C%d' % i
        ax1.plot(x, [r['output_throughput'] for r in rows], 'o-', color=color, label=label)
        ax2.plot(x, [r['p50_ttft_ms'] for r in rows], 'o-', color=color, label='%s p50' % label)
        ax2.plot(x, [r['p99_ttft_ms'] for r in rows], 's--', color=color, label='%s p99' % label)
    for ax, ylabel in ((ax1, 'output tokens/s'), (ax2, 'TTFT (ms)')):
        ax.set_xscale('log', base=2)
        ax.set_xlabel('concurrency')
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_title('output throughput')
    ax2.set_title('time to first token')
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print('wrote %s' % out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    s = sub.add_parser('sweep')
    q = sub.add_parser('ab', help='two endpoints, one run: ABBA blocks per level')
    q.add_argument('--base-url-b', required=True, help='endpoint B (--base-url is A)')
    q.add_argument('--labels', default='A,B')
    q.add_argument('--blocks', type=int, default=4)
    for p_ in (s, q):
        add_bench_args(p_)
    p = sub.add_parser('plot')
    p.add_argument('csv', nargs='+')
    p.add_argument('--labels', default='')
    p.add_argument('--out', required=True)
    p.add_argument('--title', default='')
    a = ap.parse_args()
    if getattr(a, 'api_key_stdin', False):
        os.environ['OPENAI_API_KEY'] = sys.stdin.readline().strip()
    if a.cmd == 'sweep':
        sweep(a)
    elif a.cmd == 'ab':
        ab(a)
    else:
        labels = a.labels.split(',') if a.labels else [os.path.basename(os.path.dirname(os.path.abspath(c))) or c
                                                       for c in a.csv]
        if len(labels) != len(a.csv):
            raise SystemExit('--labels needs one label per CSV')
        plot_csvs(a.csv, labels, a.out, a.title)


def add_bench_args(s):
    s.add_argument('--base-url', required=True)
    s.add_argument('--model', required=True, help='model path or id (its tokenizer is used)')
    s.add_argument('--served-model-name', required=True)
    s.add_argument('--tokenizer', default='')
    s.add_argument('--concurrency', default='1,2,4,8,16,32')
    s.add_argument('--input-len', type=int, default=256)
    s.add_argument('--output-len', type=int, default=128)
    s.add_argument('--prompts-per-level', type=int, default=8, help='prompts = max(min, concurrency x this)')
    s.add_argument('--min-prompts', type=int, default=16)
    s.add_argument('--num-warmups', type=int, default=0)
    s.add_argument('--seed', type=int, default=0)
    s.add_argument('--vllm', default='vllm', help='vllm executable (subprocess mode)')
    s.add_argument('--inproc', action='store_true', help='run the benchmark in this interpreter')
    s.add_argument('--out-dir', required=True)
    s.add_argument('--csv-name', default='sweep.csv')
    s.add_argument('--label', default='sweep')
    s.add_argument('--api-key-stdin', action='store_true',
                   help='read the API key from stdin and hand it to the benchmark as OPENAI_API_KEY (never in argv)')
    s.add_argument('--title', default='')
    s.add_argument('--plot', action='store_true', help='also write the PNG next to the CSV')


if __name__ == '__main__':
    sys.exit(main())
