"""`theval weights status|verify|fetch`: the quality models' weights store."""
import json
from dataclasses import asdict

from theval_mesh.backends.weights import store as ws
from theval_mesh.backends.weights.registry import CLASSIC_MODELS, HEADPOSE_MODELS, MODELS
from theval_mesh.pure.exit_codes import EXIT_ERROR, EXIT_OK


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "weights", help="show, check or download the quality models' weights",
        description="The weights store is a directory holding the weight files of the quality "
                    "models (default: $THEVAL_WEIGHTS, else ~/.cache/theval/weights). Without "
                    "them the quality metrics fall back to a labelled training-free proxy.")
    actions = p.add_subparsers(dest="weights_action", required=True, metavar="ACTION")
    for name, text in (("status", "list each file, where it goes and whether it is there"),
                       ("verify", "check the files' sha256 (exit 1 on a missing or bad file)"),
                       ("fetch", "download the missing files (needs internet access)"),
                       ("stand-in", "write deterministic STAND-IN weights (meaningless scores) to test "
                                    "a pipeline against the reference scripts on the same network")):
        a = actions.add_parser(name, help=text, description=text)
        a.add_argument("--store", metavar="DIR", help="weights store directory")
        a.add_argument("--model", action="append",
                       choices=sorted(MODELS) + sorted(HEADPOSE_MODELS) + sorted(CLASSIC_MODELS),
                       metavar="NAME", help=f"only this model (repeatable): "
                       f"{', '.join(sorted(MODELS) + sorted(HEADPOSE_MODELS))}; "
                       f"the classic metrics' networks (`theval classic`, only when named): "
                       f"{', '.join(sorted(CLASSIC_MODELS))}")
        if name == "stand-in":
            a.add_argument("--seed", type=int, default=0, help="numpy seed (default 0)")
            a.add_argument("--reference-extras", action="store_true",
                           help="also the files only the reference's code reads (the timm ResNet-50 "
                                "init of its pyiqa 0.1.13, FaceXFormer's Swin-B init)")
        if name not in ("fetch", "stand-in"):
            a.add_argument("--json", action="store_true", help="print one JSON object (store, files) instead")
        if name == "verify":
            a.add_argument("--allow-missing", action="store_true",
                           help="a missing file is no error (quality 'auto' then uses the labelled proxy); "
                                "a file that does not match still is (e.g. a Kubernetes init container)")
        a.set_defaults(func=run)


def _table(rows, columns) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(columns)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(columns)] + [line(r) for r in rows])


def format_rows(rows, verified: bool) -> str:
    cols = ["model", "file", "path", "present", "sha256"] + (["state"] if verified else [])
    body = [[r.model, r.file, r.path, "yes" if r.present else "NO",
             r.sha256[:12] if r.sha256 else "-"]
            + ([f"{r.state} {r.detail}".strip()] if verified else []) for r in rows]
    return _table(body, cols)


def _hints(rows) -> list[str]:
    urls = {f.name: f.url for m in [*MODELS.values(), *HEADPOSE_MODELS.values(),
                                     *CLASSIC_MODELS.values()] for f in m.files}
    return [f"missing: download {urls[r.file]} to {r.path}" for r in rows if not r.present]


def run(args) -> int:
    store = ws.resolve(args.store)
    if args.weights_action == "fetch":
        rows = ws.fetch(store, args.model)  # raises UserError (one line, exit 1) when offline
        print(format_rows(rows, verified=True))
        return EXIT_OK
    if args.weights_action == "stand-in":
        from theval_mesh.backends import stand_in
        named = args.model or [*MODELS, *HEADPOSE_MODELS]
        marker = stand_in.write(store, args.seed, [m for m in named if m in MODELS],
                                args.reference_extras, headpose=any(m in HEADPOSE_MODELS for m in named),
                                classic=[m for m in named if m in CLASSIC_MODELS])
        print(f"wrote {len(marker['files'])} stand-in file(s) (seed {args.seed}) to {store}; their "
              "scores mean nothing, `theval weights verify` refuses them and results name them "
              f"{ws.stand_in_label(args.seed)}")
        return EXIT_OK
    verified = args.weights_action == "verify"
    rows = ws.verify(store, args.model) if verified else ws.status(store, args.model)
    bad = [r for r in rows if r.state in ("mismatch", "stand-in") or (r.state == "missing" and not getattr(args, "allow_missing", False))]
    if args.json:
        print(json.dumps({"store": str(store), "files": [asdict(r) for r in rows], "hints": _hints(rows),
                          "ok": not (verified and bad)}, indent=1))
        return EXIT_ERROR if verified and bad else EXIT_OK
    print(f"weights store: {store}")
    print(format_rows(rows, verified))
    for line in _hints(rows):
        print(line)
    if verified and bad:
        print(f"verify failed: {len(bad)} file(s) missing, stand-in or not matching: "
              f"{', '.join(r.file for r in bad)}")
        return EXIT_ERROR
    return EXIT_OK
