"""`theval study serve|export`: a local pairwise human-preference study of models' videos, and its
answers as the CSV `theval align` reads."""
import sys

from theval_mesh.pure.errors import UserError

DEFAULT_STORE = "results/study.sqlite"
DEFAULT_PORT = 8765


def register(subparsers) -> None:
    p = subparsers.add_parser("study", help="a pairwise human-preference study in the browser, and its answers",
                              description="Show a rater pairs of videos of the same source by two models and "
                                          "record which looks more realistic; export the answers as CSV.")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    s = actions.add_parser("serve", help="serve the study page; prints its URL (with its access token)",
                           description="Pairs videos of different models by file name (without the suffix), "
                                       "in a random order and random sides drawn from --seed, and serves "
                                       "the page until Ctrl-C. A rater who comes back resumes where they stopped.")
    s.add_argument("--models", nargs="+", required=True, metavar="DIR",
                   help="two or more folders of videos, one per model (named after the folder, or NAME=DIR)")
    s.add_argument("--store", default=DEFAULT_STORE, metavar="FILE",
                   help=f"where the answers go (default {DEFAULT_STORE})")
    s.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"(default {DEFAULT_PORT}; 0: any free port)")
    s.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--pairs", type=int, default=None, metavar="N", help="show N pairs (default: every pair)")
    s.add_argument("--rater", default="rater", metavar="NAME", help="who answers (default 'rater')")
    s.add_argument("--seed", type=int, default=0, help="the seed of the order and sides (default 0)")
    s.set_defaults(func=serve)

    e = actions.add_parser("export", help="write the answers as CSV: model_a,model_b,preferred,video_a,video_b,rater",
                           description="model_a/video_a were shown on the left, model_b/video_b on the right; "
                                       "preferred is the preferred model's name. Only answered pairs.")
    e.add_argument("--store", default=DEFAULT_STORE, metavar="FILE", help=f"(default {DEFAULT_STORE})")
    e.add_argument("--out", default="-", metavar="FILE", help="the CSV file (default: standard output)")
    e.add_argument("--study", default=None, metavar="ID", help="only this study's answers (default: all)")
    e.set_defaults(func=export)


def serve(args) -> int:
    from theval_mesh.rpc.security import is_loopback
    from theval_mesh.studies.study_server import load_study, make_server, url_of

    study = load_study(args.models, args.store, args.rater, args.seed, args.pairs)
    store = study.store
    try:
        server = make_server(study, args.host, args.port)
        done = len(store.answered(study.id, study.rater))
        print(f"study {study.id}: {len(study.pairs)} pairs of {', '.join(study.folders)}; rater {study.rater!r} "
              f"has answered {done}; answers go to {args.store}", file=sys.stderr)
        if not is_loopback(args.host):
            print(f"warning: listening on {args.host}, beyond this machine, over plain HTTP: anyone who sees "
                  "the URL's token on the network can answer", file=sys.stderr)
        print(f"open {url_of(server, study)}  (Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print(f"\nstopped: {len(store.answered(study.id, study.rater))} answers in {args.store}", file=sys.stderr)
        finally:
            server.server_close()
    finally:
        store.close()
    return 0


def export(args) -> int:
    from theval_mesh.stores.study_store import StudyStore

    store = StudyStore(args.store, create=False)
    try:
        if args.out == "-":
            n = store.export_csv(sys.stdout, args.study)
        else:
            try:
                with open(args.out, "w", newline="", encoding="utf-8") as out:
                    n = store.export_csv(out, args.study)
            except OSError as err:
                raise UserError(f"--out {args.out}: {err.strerror}") from None
    finally:
        store.close()
    print(f"{n} answers from {args.store}" + (f" to {args.out}" if args.out != "-" else ""), file=sys.stderr)
    return 0
