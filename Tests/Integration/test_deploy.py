"""deploy/: the compose file, the Kubernetes manifests and the systemd unit agree with
the real server and with one another, and each one's command starts the server with
the service's example config.

Every xhrpcd command line in them (and the Dockerfile's, whose ENTRYPOINT, HEALTHCHECK
and volumes Compose uses) is read from the files: its flags must be the server's; the
drain it gets must end, with the time the server takes after it, before the deployment
sends SIGKILL; the probes must ask its operations listener (--http-listen); its socket must be in a directory that is a
volume; the secrets must be mounted where the config file reads them; the TLS port
must be the same in the config, the Deployment, the Service, the NetworkPolicy and the
compose file. Then each command runs for real, on a copy of the example config whose
paths are moved into a temporary directory and whose TLS listener is moved to
loopback, with a certificate made by the openssl command of docs/operations/deployment.md: a client verifies
it, authenticates with a token made for each principal, and the probes pass.

`systemd-analyze verify` checks the unit where systemd-analyze is installed (the test
is skipped, saying so, where it is not). `make lint` validates the manifests and the
compose file against their schemas.
"""

import hashlib
import http.client
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import yaml

from support import REPO, XhrpcServer, free_tcp_ports, require_binary
from xhrpc import Client, RPCError

DEPLOY = REPO / "deploy"
EXAMPLE_CONFIG = DEPLOY / "service-config.example.json"
COMPOSE = DEPLOY / "compose.yaml"
KUBERNETES = DEPLOY / "kubernetes"
UNIT = DEPLOY / "systemd" / "xhrpcd.service"

# The example config's principals. Their "tokenSha256" is a placeholder that is not a
# digest, so an unedited copy refuses to start; the tests put in the digests of tokens
# they make, as docs/operations/deployment.md tells an operator to.
EXAMPLE_PRINCIPALS = ("app", "ops")
ADMINS = {"ops"}
# What the server does after the drain before it exits: queued replies go out for up
# to a second, then cookies are saved. A grace period must leave this much on top.
AFTER_DRAIN_SECONDS = 2
DOCKER_STOP_SECONDS = 10  # `docker stop` (and Compose, unless told) waits this long
COMPOSE_SERVICE = "xhrpcd"
# The certificate recipe of docs/operations/deployment.md: a self-signed ECDSA certificate.
CERT_COMMAND = ("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 "
                "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 "
                "-keyout tls.key -out tls.crt")
COMMAND_TIMEOUT = 60


# --------------------------------------------------------------------------
# Reading the files.

def yaml_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def yaml_document(path):
    docs = yaml_documents(path)
    if len(docs) != 1:
        raise AssertionError("%s: expected one YAML document, found %d" % (path, len(docs)))
    return docs[0]


def kubernetes(kind):
    """The one object of ``kind`` among the manifests under deploy/kubernetes."""
    found = [d for p in sorted(KUBERNETES.glob("*.yaml")) for d in yaml_documents(p) if d.get("kind") == kind]
    if len(found) != 1:
        raise AssertionError("expected one %s under %s, found %d" % (kind, KUBERNETES, len(found)))
    return found[0]


def dockerfile():
    """The final stage of the Dockerfile: {INSTRUCTION: [arguments, ...]}, continuation
    lines joined and comment lines dropped (as Docker does)."""
    logical, current = [], ""
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip().split(None, 1))
        current = ""
    last_from = max(i for i, step in enumerate(logical) if step[0].upper() == "FROM")
    out = {}
    for step in logical[last_from:]:
        out.setdefault(step[0].upper(), []).append(step[1] if len(step) > 1 else "")
    return out


def dockerfile_exec_form(instruction):
    """The JSON array of the one ``instruction`` (CMD, ENTRYPOINT) or of HEALTHCHECK's CMD."""
    (text,) = dockerfile()[instruction]
    if instruction == "HEALTHCHECK":
        text = text.split(" CMD ", 1)[1]
    return json.loads(text)


def unit_entries(path):
    """[(section, key, value)] of a systemd unit, in order (keys may repeat)."""
    entries, section = [], None
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, value = line.split("=", 1)
        entries.append((section, key.strip(), value.strip()))
    return entries


def unit_values(key, section="Service"):
    return [v for s, k, v in unit_entries(UNIT) if s == section and k == key]


def unit_value(key, section="Service"):
    (value,) = unit_values(key, section)
    return value


def duration(text):
    """Seconds of a Compose or systemd duration: 15, "15s", "1m30s", "1min 30s"."""
    if isinstance(text, (int, float)):
        return float(text)
    units = {"": 1, "s": 1, "sec": 1, "ms": 0.001, "m": 60, "min": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
    if not parts or re.sub(r"[\d.\sa-z]", "", text):
        raise ValueError("not a duration: %r" % text)
    return sum(float(n) * units[u] for n, u in parts)


_help = None


def server_flags():
    """{flag: takes a value} from `xhrpcd --help`, and the help text with white space
    collapsed (for the defaults it states)."""
    global _help
    if _help is None:
        p = subprocess.run([require_binary(), "--help"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        if p.returncode != 0:
            raise AssertionError("xhrpcd --help failed: %s" % p.stderr)
        flags = {m.group(1): bool(m.group(2)) for m in re.finditer(r"^  (--[a-z0-9-]+)( <[^>]+>)?", p.stdout, re.M)}
        _help = (flags, " ".join(p.stdout.split()))
    return _help


def parse_arguments(argv):
    """{flag: [values]} of an xhrpcd command line (the binary not included); an unknown
    flag or a stray word raises."""
    flags, _ = server_flags()
    out, i = {}, 0
    while i < len(argv):
        word = argv[i]
        name, eq, value = word.partition("=")
        if name not in flags:
            raise AssertionError("%r is not a flag of xhrpcd --help (in %s)" % (word, argv))
        if flags[name] and not eq:
            if i + 1 >= len(argv):
                raise AssertionError("%s needs a value (in %s)" % (name, argv))
            i += 1
            value = argv[i]
        elif not flags[name] and eq:
            raise AssertionError("%s takes no value (in %s)" % (name, argv))
        out.setdefault(name, []).append(value)
        i += 1
    return out


def example_config():
    with open(EXAMPLE_CONFIG) as f:
        return json.load(f)


class Settings:
    """What the server does with one deployment's command line, reading the example
    config wherever the command names a config file (the service's config is a copy
    of the example with other tokens)."""

    def __init__(self, argv):
        self.argv = argv
        self.flags = parse_arguments(argv)
        self.config = example_config() if "--config" in self.flags else {}
        _, help_text = server_flags()
        self.listen = self.flags.get("--listen") or self.config.get("listen", [])
        self.drain = float(self._setting("--drain-seconds", "drainSeconds") or
                           re.search(r'"drainSeconds"; default ([0-9.]+)', help_text).group(1))
        self.state_dir = self._setting("--state-dir", "stateDir")
        self.tls_cert = self._setting("--tls-cert", "tlsCert")
        self.tls_key = self._setting("--tls-key", "tlsKey")
        self.http_listen = self._setting("--http-listen", "httpListen")

    def _setting(self, flag, key):
        """A flag wins over the file's key (one value each)."""
        if flag in self.flags:
            return self.flags[flag][-1]
        value = self.config.get(key)
        return None if value is None else str(value)

    @property
    def socket_path(self):
        (path,) = [a[len("unix:"):] for a in self.listen if a.startswith("unix:")]
        return path

    @property
    def http_port(self):
        """The operations listener's port (--http-listen, config key httpListen)."""
        if self.http_listen is None:
            raise AssertionError("no --http-listen or httpListen in %s" % self.argv)
        return int(self.http_listen.rsplit(":", 1)[1])

    @property
    def tls_port(self):
        (port,) = [int(a.rsplit(":", 1)[1]) for a in self.listen if a.startswith("tls:")]
        return port

    @property
    def config_path(self):
        (path,) = self.flags["--config"]
        return path


def unix_connect_path(command):
    """The socket a command (argv) connects to with socat's UNIX-CONNECT."""
    found = re.findall(r"UNIX-CONNECT:(\S+)", " ".join(command))
    if len(found) != 1:
        raise AssertionError("expected one UNIX-CONNECT: in %s" % command)
    return found[0]


def probe_target(probe):
    """(port, path) that a probe asks: a Kubernetes httpGet ({path, port}, the port by
    the container's port name), or a command that sends GET PATH with socat to
    TCP:127.0.0.1:PORT."""
    if isinstance(probe, dict):
        port = probe["port"]
        if isinstance(port, str):
            (port,) = [p["containerPort"] for p in deployment_container()["ports"] if p["name"] == port]
        return port, probe["path"]
    text = " ".join(probe)
    ports = re.findall(r"TCP:127\.0\.0\.1:(\d+)", text)
    paths = re.findall(r"GET (/\S*) HTTP/1\.1", text)
    if len(ports) != 1 or len(paths) != 1:
        raise AssertionError("expected GET PATH to one TCP:127.0.0.1:PORT in the probe %s" % probe)
    return int(ports[0]), paths[0]


def compose_service(name=COMPOSE_SERVICE):
    return yaml_document(COMPOSE)["services"][name]


def compose_mounts(service):
    """{container path: volume or source} of a compose service's volumes (short syntax)."""
    mounts = {}
    for v in service.get("volumes", []):
        source, target = v.split(":")[:2]
        mounts[target] = source
    return mounts


def deployment_container():
    (container,) = kubernetes("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


class Deployment:
    """One way to run the server: its xhrpcd arguments, what runs before SIGKILL, its
    probes, and the directories it provides (container paths)."""

    def __init__(self, name, argv, grace, probes, volumes, secrets):
        self.name, self.argv, self.grace, self.probes = name, argv, grace, probes
        self.volumes = volumes  # directories that are volumes (writable, shared or kept)
        self.secrets = secrets  # paths of secret files the deployment provides
        self.settings = Settings(argv)


def compose_deployment():
    service = compose_service()
    if "entrypoint" in service:
        raise AssertionError("compose service %s must use the image's ENTRYPOINT (xhrpcd)" % COMPOSE_SERVICE)
    health = service.get("healthcheck")
    probe = health["test"][1:] if health else dockerfile_exec_form("HEALTHCHECK")
    return Deployment("compose", service.get("command", dockerfile_exec_form("CMD")),
                      duration(service.get("stop_grace_period", DOCKER_STOP_SECONDS)), [probe],
                      set(compose_mounts(service)), {s["target"] for s in service.get("secrets", [])})


def kubernetes_deployment():
    pod = kubernetes("Deployment")["spec"]["template"]["spec"]
    container = deployment_container()
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret = kubernetes("Secret")
    secrets, dirs = set(), set()
    for name, mount in mounts.items():
        volume = volumes[name]
        if "secret" in volume:
            if volume["secret"]["secretName"] != secret["metadata"]["name"]:
                raise AssertionError("the Deployment mounts Secret %s, the template is %s" % (
                    volume["secret"]["secretName"], secret["metadata"]["name"]))
            secrets |= {mount["mountPath"] + "/" + key for key in secret["stringData"]}
        else:
            dirs.add(mount["mountPath"])
    if "command" in container:
        raise AssertionError("the Deployment's container must use the image's ENTRYPOINT (xhrpcd)")
    probes = [container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]
    return Deployment("kubernetes", container.get("args", dockerfile_exec_form("CMD")),
                      pod["terminationGracePeriodSeconds"], probes, dirs, secrets)


def systemd_deployment():
    words = shlex.split(unit_value("ExecStart"))
    if words[0] != "/usr/local/bin/xhrpcd":
        raise AssertionError("ExecStart runs %s, not /usr/local/bin/xhrpcd" % words[0])
    credentials = dict(v.split(":", 1) for v in unit_values("LoadCredential"))
    # %d is the credentials directory: a file there is the LoadCredential source's copy.
    argv = []
    for word in words[1:]:
        if word.startswith("%d/"):
            name = word[3:]
            if name not in credentials:
                raise AssertionError("ExecStart uses %s, which no LoadCredential= provides" % word)
            word = credentials[name]
        argv.append(word)
    dirs = {"/run/" + unit_value("RuntimeDirectory"), "/var/lib/" + unit_value("StateDirectory")}
    return Deployment("systemd", argv, duration(unit_value("TimeoutStopSec")), [], dirs, set(credentials.values()))


def deployments():
    return [compose_deployment(), kubernetes_deployment(), systemd_deployment()]


# --------------------------------------------------------------------------
# The files against the server and against one another.

class Files(unittest.TestCase):
    def test_every_yaml_file_parses(self):
        paths = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
        self.assertGreaterEqual(len(paths), 5, paths)
        for path in paths:
            for doc in yaml_documents(path):
                self.assertIsInstance(doc, dict, path)

    def test_kustomization_lists_every_manifest_but_the_secret_template(self):
        resources = yaml_document(KUBERNETES / "kustomization.yaml")["resources"]
        manifests = sorted(p.name for p in KUBERNETES.glob("*.yaml")
                           if p.name not in ("kustomization.yaml", "secret.example.yaml"))
        self.assertEqual(sorted(resources), manifests)

    def test_every_flag_is_the_servers(self):
        for d in deployments():
            with self.subTest(d.name):
                self.assertTrue(d.settings.flags, d.argv)  # parse_arguments raised on anything unknown
        parse_arguments(dockerfile_exec_form("CMD"))
        self.assertEqual(dockerfile_exec_form("ENTRYPOINT"), ["/usr/local/bin/xhrpcd"])

    def test_the_drain_ends_before_sigkill(self):
        for d in deployments():
            with self.subTest(d.name):
                self.assertLessEqual(d.settings.drain + AFTER_DRAIN_SECONDS, d.grace,
                                     "%s: drain %s s + %s s must fit in %s s" % (d.name, d.settings.drain,
                                                                               AFTER_DRAIN_SECONDS, d.grace))
        image = Settings(dockerfile_exec_form("CMD"))  # `docker run` of the image alone
        self.assertLessEqual(image.drain + AFTER_DRAIN_SECONDS, DOCKER_STOP_SECONDS)

    def test_probes_ask_the_operations_listener(self):
        for d in deployments() + [Deployment("image", dockerfile_exec_form("CMD"), 0,
                                             [dockerfile_exec_form("HEALTHCHECK")], set(), set())]:
            with self.subTest(d.name):
                for probe in d.probes:
                    port, path = probe_target(probe)
                    self.assertEqual(port, d.settings.http_port)
                    self.assertIn(path, ("/healthz", "/readyz"))
        container = deployment_container()
        self.assertEqual(container["livenessProbe"]["httpGet"]["path"], "/healthz")
        self.assertEqual(container["readinessProbe"]["httpGet"]["path"], "/readyz")
        shell = compose_service("shell")
        self.assertEqual(unix_connect_path(shell["entrypoint"]), compose_deployment().settings.socket_path)
        # The shell reaches the server's socket through the same volume.
        socket_dir = os.path.dirname(compose_deployment().settings.socket_path)
        self.assertEqual(compose_mounts(shell)[socket_dir], compose_mounts(compose_service())[socket_dir])

    def test_socket_and_state_directories_are_volumes(self):
        for d in deployments():
            with self.subTest(d.name):
                self.assertIn(os.path.dirname(d.settings.socket_path), d.volumes)
                self.assertIn(d.settings.state_dir, d.volumes)
        self.assertEqual(set(compose_mounts(compose_service()).values()), set(yaml_document(COMPOSE)["volumes"]))

    def test_secrets_are_where_the_server_reads_them(self):
        for d in deployments():
            with self.subTest(d.name):
                s = d.settings
                self.assertEqual(d.secrets, {s.config_path, s.tls_cert, s.tls_key})

    def test_the_tls_port_is_the_same_everywhere(self):
        port = Settings(compose_deployment().argv).tls_port
        for d in deployments():
            self.assertEqual(d.settings.tls_port, port, d.name)
        published = [str(p).split("/")[0].rsplit(":", 1)[-1] for p in compose_service()["ports"]]
        self.assertEqual(published, [str(port)])
        container_port, ops_port = deployment_container()["ports"]
        self.assertEqual(container_port["containerPort"], port)
        (service_port,) = kubernetes("Service")["spec"]["ports"]
        target = service_port["targetPort"]
        self.assertEqual(container_port["containerPort"] if target == container_port.get("name") else target, port)
        rule, ops_rule = kubernetes("NetworkPolicy")["spec"]["ingress"]
        self.assertEqual([p["port"] for p in rule["ports"]], [port])
        # The operations listener's port: declared on the container, admitted by the policy.
        http_port = kubernetes_deployment().settings.http_port
        self.assertEqual(ops_port["containerPort"], http_port)
        self.assertEqual([p["port"] for p in ops_rule["ports"]], [http_port])

    def test_selectors_match_the_pods(self):
        labels = kubernetes("Deployment")["spec"]["template"]["metadata"]["labels"]
        selectors = [kubernetes("Deployment")["spec"]["selector"]["matchLabels"],
                     kubernetes("Service")["spec"]["selector"],
                     kubernetes("NetworkPolicy")["spec"]["podSelector"]["matchLabels"]]
        for selector in selectors:
            self.assertTrue(selector)
            self.assertEqual({k: labels.get(k) for k in selector}, selector)

    def test_containers_run_as_the_images_user(self):
        (user,) = dockerfile()["USER"]
        uid, gid = user.split(":")
        self.assertEqual(gid, uid)  # the image's group has the user's number
        pod = kubernetes("Deployment")["spec"]["template"]["spec"]["securityContext"]
        self.assertEqual((str(pod["runAsUser"]), str(pod["runAsGroup"]), str(pod["fsGroup"])), (uid, uid, uid))
        self.assertTrue(pod["runAsNonRoot"])
        for name in ("xhrpcd", "shell"):
            self.assertEqual(compose_service(name)["user"], "%s:%s" % (uid, uid), name)

    def test_examples_hold_placeholders_only(self):
        principals = {p["name"]: p for p in example_config()["principals"]}
        self.assertEqual(set(principals), set(EXAMPLE_PRINCIPALS))
        page = (REPO / "docs" / "operations" / "deployment.md").read_text()
        for name, p in principals.items():
            self.assertTrue(p["tokenSha256"].startswith("REPLACE-WITH-"), name)
            self.assertIn(p["tokenSha256"], page)
            self.assertEqual(p.get("admin", False), name in ADMINS, name)
        for key, value in kubernetes("Secret")["stringData"].items():
            self.assertTrue(value.startswith("REPLACE-ME"), key)
        self.assertIn(CERT_COMMAND, " ".join(page.replace("\\\n", " ").split()))  # continued lines joined
        for path in DEPLOY.rglob("*"):
            if path.is_file():
                self.assertNotIn("PRIVATE KEY-----", path.read_text(errors="replace"), path)

    def test_an_unedited_example_config_refuses_to_start(self):
        p = subprocess.run([require_binary(), "--config", str(EXAMPLE_CONFIG)],
                           capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('"tokenSha256" must be 64 hex digits', p.stderr)

    def test_systemd_analyze_verify(self):
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            self.skipTest("systemd-analyze is not installed (Debian package systemd): the unit is not verified")
        with tempfile.TemporaryDirectory(prefix="xhrpc-unit-") as d:
            # verify checks that ExecStart's binary exists: point it at the one under test.
            text = UNIT.read_text().replace("ExecStart=/usr/local/bin/xhrpcd ", "ExecStart=%s " % require_binary())
            Path(d, UNIT.name).write_text(text)
            p = subprocess.run([analyze, "verify", "--man=no", str(Path(d, UNIT.name))],
                               capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        # Unknown keys and bad values are warnings with exit code 0: any output fails.
        self.assertEqual((p.returncode, p.stdout + p.stderr), (0, ""))


# --------------------------------------------------------------------------
# Each deployment's command, run for real.

def make_certificate(directory):
    """tls.crt and tls.key in ``directory``, by the command of docs/operations/deployment.md."""
    subprocess.run(shlex.split(CERT_COMMAND), cwd=directory, check=True, capture_output=True, timeout=COMMAND_TIMEOUT)
    return os.path.join(directory, "tls.crt")


class Commands(unittest.TestCase):
    """Each deployment's xhrpcd command on this machine: its container paths moved below
    a temporary directory, the example config's TLS listener moved to loopback."""

    def run_deployment(self, deployment):
        d = tempfile.mkdtemp(prefix="xhrpc-deploy-", dir="/tmp")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        s = deployment.settings

        def local(path):
            return d + path

        port, http_port = free_tcp_ports(2)
        config = example_config()
        tokens = {p["name"]: os.urandom(32).hex() for p in config["principals"]}
        for p in config["principals"]:
            p["tokenSha256"] = hashlib.sha256(tokens[p["name"]].encode()).hexdigest()
        config["listen"] = ["tls:127.0.0.1:%d" % port if a.startswith("tls:") else "unix:" + local(a[5:])
                            for a in config["listen"]]
        if "httpListen" in config:
            config["httpListen"] = "tcp:127.0.0.1:%d" % http_port
        for key in ("tlsCert", "tlsKey", "stateDir"):
            config[key] = local(config[key])
        for directory in deployment.volumes:
            os.makedirs(local(directory), mode=0o700)
        certs = tempfile.mkdtemp(dir=d)
        ca = make_certificate(certs)
        sources = {s.tls_cert: os.path.join(certs, "tls.crt"), s.tls_key: os.path.join(certs, "tls.key")}
        for path in deployment.secrets:
            os.makedirs(os.path.dirname(local(path)), exist_ok=True)
            if path == s.config_path:
                with open(local(path), "w") as f:
                    json.dump(config, f)
            elif path in sources:
                shutil.copyfile(sources[path], local(path))
            else:
                self.fail("%s provides %s, which the server does not read" % (deployment.name, path))
        argv = [local(a) if a.startswith("/") else a for a in deployment.argv]
        argv = ["tcp:127.0.0.1:%d" % http_port if a.startswith("tcp:") else a for a in argv]

        server = XhrpcServer()
        server.dir, server.socket_path, server.tls_port = d, local(s.socket_path), port
        server.launch([require_binary()] + argv)
        try:
            for name, token in tokens.items():
                with Client.connect_tls("127.0.0.1", port, cafile=ca, server_hostname="localhost") as c:
                    with self.assertRaises(RPCError) as refused:
                        c.call("server.info")
                    self.assertEqual(refused.exception.reason, "unauthenticated")
                    self.assertEqual(c.call("auth", {"token": token}), {"principal": name, "admin": name in ADMINS})
                    self.assertEqual(c.call("server.info")["name"], "xhrpcd")
            for probe in deployment.probes:
                _, path = probe_target(probe)
                if isinstance(probe, dict):  # the kubelet's GET
                    conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=COMMAND_TIMEOUT)
                    conn.request("GET", path)
                    status = conn.getresponse().status
                    conn.close()
                    self.assertEqual(status, 200, "probe GET %s" % path)
                    continue
                command = [re.sub(r"TCP:127\.0\.0\.1:\d+", "TCP:127.0.0.1:%d" % http_port, w) for w in probe]
                p = subprocess.run(command, capture_output=True, timeout=COMMAND_TIMEOUT)
                self.assertEqual(p.returncode, 0, "probe %s: %s" % (command, p.stderr))
        finally:
            code = server.stop()
        self.assertEqual(code, 0, server.stderr_text())

    def test_compose(self):
        self.run_deployment(compose_deployment())

    def test_kubernetes(self):
        self.run_deployment(kubernetes_deployment())

    def test_systemd(self):
        self.run_deployment(systemd_deployment())


if __name__ == "__main__":
    unittest.main()
