"""Write the service images' Dockerfiles from their templates: `python scripts/dockerfiles.py`.

Each image of scripts/images.py that runs a service (its `service`) gets docker/NAME.Dockerfile made
from docker/templates/service.template (on the python base) or service-on-torch.template (on the
shared torch runtime): they differ only in the image's name, summary, health-check start period,
service and system libraries. tests/unit/test_dockerfiles.py checks that the files are current;
`--check` does the same here. The other Dockerfiles (torch, triton, triton-gpu, worker) are
written by hand: they run no service.
"""
import re
import sys
import textwrap
from pathlib import Path

if __package__:  # imported as scripts.dockerfiles (the tests)
    from scripts import images
else:  # run as a file (python scripts/dockerfiles.py): scripts/ is first on sys.path
    import images

TEMPLATES = images.DOCKER / "templates"


def template_of(image: images.Image) -> Path:
    assert image.parent in (None, "torch"), f"{image.name}: no template starts FROM {image.parent}"
    return TEMPLATES / ("service-on-torch.template" if image.parent else "service.template")


def render(image: images.Image) -> str:
    """The Dockerfile of a service's image."""
    text = template_of(image).read_text()
    # "@if FIELD@ ... @end@": lines kept for the images whose FIELD is set (gl: OpenCV's libraries)
    text = re.sub(r"^@if (\w+)@\n(.*?)^@end@\n", lambda m: m[2] if getattr(image, m[1]) else "", text,
                  flags=re.S | re.M)
    header = textwrap.fill(f"{image.summary} {image.notes}".strip(), 100, initial_indent="# ",
                           subsequent_indent="# ")
    values = {"header": header, "name": image.name, "summary": image.summary, "service": image.service,
              "health_start_s": str(image.health_start_s)}
    return re.sub(r"@(\w+)@", lambda m: values[m[1]], text)


def generated() -> dict:
    """{path: text} of every generated Dockerfile."""
    return {images.DOCKER / f"{i.name}.Dockerfile": render(i) for i in images.IMAGES.values() if i.service}


def main(argv=None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = {path: text for path, text in generated().items() if not path.is_file() or path.read_text() != text}
    for path, text in stale.items():
        if check:
            print(f"{path.relative_to(images.ROOT)} is stale: run python scripts/dockerfiles.py", file=sys.stderr)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(images.ROOT)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
