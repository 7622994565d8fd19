import torch
from torch._functorch.aot_autograd import aot_function
from torch.fx.experimental.proxy_tensor import make_fx
def fw(gm, ex): return gm
def f(x1):
    t = torch.ops.aten.transpose_.default(x1, 1, 0)
    torch.ops.aten.relu_.default(t)
    return (x1.clone(),)
x=torch.randn(2,3)
print(f(x.clone())[0].shape)
for name, fn in [('aot', lambda: aot_function(f, fw_compiler=fw, keep_inference_input_mutations=True)(x.clone())),
                 ('functionalize', lambda: make_fx(torch.func.functionalize(f))(x.clone())),
                 ('compile', lambda: torch.compile(f, backend='aot_eager')(x.clone()))]:
    try: r=fn(); print(name, 'ok', r if isinstance(r, torch.fx.GraphModule) and print(r.code) else '')
    except Exception as e: print(name, type(e).__name__, str(e).split('\n')[0])
def g(x):
    return (torch.ops.aten.arange.start_step(-1, 2.0, 0.5, dtype=torch.int32),)
print(g(x))
for mode in ['real','fake']:
    try: print(mode, make_fx(g, tracing_mode=mode)(x).code)
    except Exception as e: print(mode, type(e).__name__, str(e).split('\n')[0])
