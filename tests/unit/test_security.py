"""Tokens, names and the refusal to serve beyond loopback without TLS and authentication."""
import pytest

from theval_mesh.pure.errors import UserError
from theval_mesh.rpc import config
from theval_mesh.rpc.security import ClientSecurity, Tokens, check_name, is_loopback

TOKEN = "t" * 32


def test_a_token_names_its_identity_and_nothing_else_does():
    tokens = Tokens.parse(f"# comment\nalice {TOKEN}\nbob {'u' * 32}\n", "test")
    assert tokens.identity([("authorization", f"Bearer {TOKEN}")]) == "alice"
    assert tokens.identity([("authorization", f"bearer {'u' * 32}")]) == "bob"
    for metadata in ([], [("authorization", TOKEN)], [("authorization", f"Basic {TOKEN}")],
                     [("authorization", f"Bearer {TOKEN[:-1]}")], [("authorization", "Bearer ")]):
        assert tokens.identity(metadata) is None, metadata
    assert TOKEN not in repr(tokens)
    assert TOKEN not in repr(ClientSecurity(token=TOKEN))


def test_tokens_from_the_environment_and_bad_token_files(tmp_path):
    assert Tokens.load(None, {"THEVAL_TOKENS": f"alice {TOKEN}, bob {'u' * 32}"}).identity(
        [("authorization", f"Bearer {'u' * 32}")]) == "bob"
    assert not Tokens.load(None, {})
    with pytest.raises(UserError, match="shorter than"):
        Tokens.parse("alice short", "test")
    with pytest.raises(UserError, match="IDENTITY TOKEN"):
        Tokens.parse(f"alice {TOKEN} extra", "test")
    loose = tmp_path / "tokens"
    loose.write_text(f"alice {TOKEN}\n")
    loose.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        Tokens.load(str(loose), {})


@pytest.mark.parametrize("name", ["GT", "Hallo2", "SadTalker v2 (256px)", "Élise/run#3", "a" * 128])
def test_names_people_give_models_are_accepted(name):
    assert check_name("model", name) == name


@pytest.mark.parametrize("name", ["", " GT", "GT ", "a" * 129, "two\nlines", "tab\tbed", "semi;colon", "x" * 5_000_000])
def test_names_outside_the_rules_are_refused_without_echoing_them(name):
    with pytest.raises(UserError) as err:
        check_name("model", name)
    assert len(str(err.value)) < 250


def test_loopback():
    assert all(map(is_loopback, ("127.0.0.1", "127.0.0.5", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "10.0.0.1", "example.org")))


def _env(tmp_path, **extra):
    env = {"THEVAL_PORT": "0", "THEVAL_METRICS_PORT": "0", "THEVAL_ALLOWED_ROOTS": str(tmp_path),
           "THEVAL_STORE": str(tmp_path / "store.sqlite"),
           **{f"THEVAL_{d.upper()}_ADDR": "127.0.0.1:1" for d in config.DEPENDENCIES}}
    return {**env, **extra}


def test_admins_are_identities_with_tokens(tmp_path):
    tokens = {"THEVAL_TOKENS": f"alice {TOKEN}, ops {'u' * 32}, audit {'v' * 32}"}
    assert config.load("evaluator", environ=_env(tmp_path, **tokens)).admins == frozenset()
    c = config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops, audit", **tokens))
    assert c.admins == {"ops", "audit"} and c.tokens.identities == {"alice", "ops", "audit"}
    with pytest.raises(UserError, match=r"THEVAL_ADMINS: no token in --tokens-file .* for 'carol': give each admin"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops,carol", **tokens))
    with pytest.raises(UserError, match="no token in .* for 'ops'"):  # a server without tokens has no admins
        config.load("evaluator", environ=_env(tmp_path, THEVAL_ADMINS="ops"))


def test_nothing_listens_beyond_loopback_without_tls_and_authentication(tmp_path):
    cert, key, ca = (tmp_path / n for n in ("c.pem", "k.pem", "ca.pem"))
    for f in (cert, key, ca):
        f.write_text("PEM")
    tls = {"THEVAL_TLS_CERT": str(cert), "THEVAL_TLS_KEY": str(key)}
    with pytest.raises(UserError, match="TLS .* and bearer tokens"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0"))
    with pytest.raises(UserError, match="bearer tokens"):
        config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **tls))
    assert config.load("evaluator", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", THEVAL_TOKENS=f"a {TOKEN}", **tls))
    with pytest.raises(UserError, match="client certificates"):
        config.load("landmarks", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", **tls))
    assert config.load("landmarks", environ=_env(tmp_path, THEVAL_HOST="0.0.0.0", THEVAL_TLS_CLIENT_CA=str(ca), **tls))
    with pytest.raises(UserError, match="needs both"):
        config.load("landmarks", environ=_env(tmp_path, THEVAL_TLS_CERT=str(cert)))
    assert config.load("landmarks", environ=_env(tmp_path)).host == "127.0.0.1"  # the default needs nothing
