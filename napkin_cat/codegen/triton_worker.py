"""A worker process for Triton kernels, run as a script: the interpreter needs ``TRITON_INTERPRET=1``
before ``triton`` is imported, so kernels run in a process of their own, never in the caller's.

Protocol: one JSON request per line on stdin, one JSON answer per line on stdout::

    {"op": "run", "source": path, "arrays": [npy paths], "out": folder}  ->  {"outputs": [npy paths]}
    {"op": "compile", "source": path, "kernels": {name: [dtype, …]}, "arch": 90, "warps": 4,
     "stages": 3}                                                          ->  {"kernels": {name: {…}}}
    anything that fails                                                    ->  {"error": text}

It imports nothing from napkin_cat (it runs with the interpreter's environment only).
"""
import importlib.util
import json
import os
import sys
import traceback


def _module(path, counter=[0]):
    counter[0] += 1
    spec = importlib.util.spec_from_file_location(f"nc_generated_{counter[0]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(req):
    import numpy as np
    import torch
    mod = _module(req["source"])
    ins = [torch.from_numpy(np.load(p)) for p in req["arrays"]]
    outs = mod.nc_run(*ins)
    paths = []
    for k, y in enumerate(outs):
        path = os.path.join(req["out"], f"y{k}.npy")
        np.save(path, y.detach().cpu().numpy())
        paths.append(path)
    return {"outputs": paths}


def compile_(req):
    import triton
    from triton.backends.compiler import GPUTarget
    mod = _module(req["source"])
    out = {}
    for name, dtypes in req["kernels"].items():
        fn = getattr(mod, name)
        sig = {p: f"*{d}" for p, d in zip(fn.arg_names, dtypes)}
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs={})
        c = triton.compile(src, target=GPUTarget("cuda", int(req["arch"]), 32),
                           options={"num_warps": int(req["warps"]), "num_stages": int(req["stages"])})
        out[name] = {"smem": int(c.metadata.shared), "num_warps": int(c.metadata.num_warps),
                     "num_stages": int(c.metadata.num_stages), "registers": int(getattr(c, "n_regs", 0) or 0)}
    return {"kernels": out}


def main():
    for line in sys.stdin:
        try:
            req = json.loads(line)
            answer = run(req) if req["op"] == "run" else compile_(req)
        except Exception:     # the caller raises it as a typed error with this text
            answer = {"error": traceback.format_exc()[-4000:]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
