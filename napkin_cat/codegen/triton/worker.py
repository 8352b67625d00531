"""A worker process for Triton kernels, run as a script: the interpreter needs ``TRITON_INTERPRET=1``
before ``triton`` is imported, so kernels run in a process of their own, never in the caller's.

Protocol: one JSON request per line on stdin, one JSON answer per line on stdout::

    {"op": "run", "source": path, "arrays": [npy paths], "formats": ["bf16", …], "out": folder, "lines": bool}
                                          ->  {"outputs": [npy paths], "lines": {line: times run} where asked}
    {"op": "compile", "source": path, "kernels": {name: [type, …]}, "arch": 90, "warps": 4,
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
    """Run the request's kernel source (its ``nc_run``) on the arrays at its paths (numpy files, in their formats); the
    outputs written back as numpy files, their paths answered.
    """
    import numpy as np
    import torch
    mod = _module(req["source"])
    formats = req.get("formats") or [None] * len(req["arrays"])
    torch_formats = {"bf16": torch.bfloat16}
    ins = [torch.from_numpy(np.load(p)) for p in req["arrays"]]
    ins = [x.to(torch_formats[f]) if f in torch_formats else x for x, f in zip(ins, formats)]
    counts = {}
    if req.get("lines"):       # each line of the source counted as the interpreter runs it, every program's
        def local(frame, event, arg):
            if event == "line":
                counts[frame.f_lineno] = counts.get(frame.f_lineno, 0) + 1
            return local
        sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename == req["source"] else None)
    try:
        outs = mod.nc_run(*ins)
    finally:
        sys.settrace(None)
    paths = []
    for k, y in enumerate(outs):
        path = os.path.join(req["out"], f"y{k}.npy")
        y = y.detach().cpu()
        np.save(path, (y.float() if y.dtype == torch.bfloat16 else y).numpy())
        paths.append(path)
    return {"outputs": paths, **({"lines": {str(n): c for n, c in counts.items()}} if req.get("lines") else {})}


def compile_(req):
    """Compile each of the request's kernels for the architecture asked (per kernel: shared memory, warps, stages,
    registers and spilled bytes per thread, :func:`_resources`), without running them.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    mod = _module(req["source"])
    out = {}
    for name, dtypes in req["kernels"].items():
        fn = getattr(mod, name)
        sig = dict(zip(fn.arg_names, dtypes))    # "*bf16" (a pointer), "i32" (a runtime size)
        src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs={})
        c = triton.compile(src, target=GPUTarget("cuda", int(req["arch"]), 32),
                           options={"num_warps": int(req["warps"]), "num_stages": int(req["stages"])})
        out[name] = {"smem": int(c.metadata.shared), "num_warps": int(c.metadata.num_warps),
                     "num_stages": int(c.metadata.num_stages), **_resources(c)}
    return {"kernels": out}


def _resources(c) -> dict:
    """``registers`` (per thread) and ``stack`` (spilled bytes per thread) of a compiled kernel, and where they were
    read (``resources_from``): the loaded kernel's (``n_regs``, ``n_spills``: set only where a GPU loaded it), else
    the cubin's resource table (``cuobjdump --dump-resource-usage``, the one Triton ships beside its ptxas: no GPU
    needed), else None for both, with the reason."""
    import re
    import subprocess
    import tempfile
    if getattr(c, "n_regs", None):
        return {"registers": int(c.n_regs), "stack": int(getattr(c, "n_spills", 0) or 0) * 4,
                "resources_from": "the loaded kernel"}
    try:
        from triton.backends.nvidia import __file__ as nvidia
        tool = os.path.join(os.path.dirname(nvidia), "bin", "cuobjdump")
        with tempfile.NamedTemporaryFile("wb", suffix=".cubin") as f:
            f.write(c.asm["cubin"])
            f.flush()
            table = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                                   check=True).stdout
        regs, stack = (re.search(rf"{key}:(\d+)", table) for key in ("REG", "STACK"))
        if regs is None:
            raise ValueError(f"no REG in cuobjdump's table: {table.strip()[:200]!r}")
        return {"registers": int(regs.group(1)), "stack": int(stack.group(1)) if stack else 0,
                "resources_from": "cuobjdump --dump-resource-usage"}
    except Exception as e:       # (a Triton without the tool, or no cubin: said, never 0)
        return {"registers": None, "stack": None, "resources_from": f"unread: {type(e).__name__}: {e}"}


def _bf16_dot_for_the_interpreter():
    """Triton's interpreter keeps bf16 values as their uint16 bit patterns and multiplies those in ``tl.dot``
    (Triton 3.x ``InterpreterBuilder.create_dot`` widens only fp8): widen bf16 operands to fp32 first, as
    the tensor cores do (exact products, fp32 sums).  Only in this worker's interpreted mode."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as it
    real = it.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        def wide(x):
            if x.dtype.scalar == tl.bfloat16:
                return it.TensorHandle(it._convert_float(x.data, tl.bfloat16, tl.float32, None).view(np.float32)
                                       .reshape(x.data.shape), tl.float32)
            return x
        return real(self, wide(a), wide(b), d, input_precision, max_num_imprecise_acc)
    it.InterpreterBuilder.create_dot = create_dot


def main():
    """Serve requests, one JSON line each on stdin, answering one JSON line each on stdout (an error: its traceback)."""
    _bf16_dot_for_the_interpreter()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            answer = run(req) if req["op"] == "run" else compile_(req)
        except Exception:     # the caller raises it as a typed error with this text
            answer = {"error": traceback.format_exc()[-4000:]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def leave():
    """The worker's end, once its caller has closed its stdin: its answers flushed, the process ended at once.  It
    holds no state the caller needs (each answer is on stdout, each output in its file), and a normal exit spent
    0.7 s of CPU per worker collecting what torch and Triton imported, while its caller waited for it at its own
    exit (measured: the two workers of a process that ran and compiled an attention kernel, 6.9 s of CPU while they
    served and 1.5 s more to exit, 3.0 s of the caller's wall clock in ``_close_workers``; now 0.2 s and 0.2 s)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
    leave()
