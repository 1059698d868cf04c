import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"  {r.get('model_filename', '?').split('/')[-1]} n_cpu_moe={r.get('n_cpu_moe')} n_prompt={r['n_prompt']} n_gen={r.get('n_gen')} "
          f"n_depth={r.get('n_depth')} avg_ts={r['avg_ts']:.1f} stddev={r['stddev_ts']:.1f} "
          f"threads={r.get('n_threads')} fa={r.get('flash_attn')}")
