#!/usr/bin/env python3
"""Test certificates for the TLS tests, made with the ``openssl`` command line.

Usage::

    python3 Tests/Fixtures/certs.py OUTDIR      # prints a JSON object {name: path}

or, from Python, ``make_all(outdir) -> {name: path}``.  Nothing here is ever
committed: the tests make the files at test time in a temporary directory.
Every key is ECDSA P-256 (fast to make; libcurl and Python accept it).  The
files are made in a private temporary directory inside OUTDIR and then renamed
into place one by one, so a reader never sees a half-written file; an exclusive
lock on ``OUTDIR/.certs.lock`` (waited for at most 60 s) keeps two processes
that share OUTDIR from mixing keys and certificates of different runs.

Files (all PEM unless said otherwise; keys unencrypted, mode 0600, unless said):

=======================  ===================================================
``ca.pem``, ``ca.key``   the test CA ("xhrpc test CA"); trust it with
                         ``--cacert ca.pem`` / CURLOPT_CAINFO
``good.pem/.key``        leaf for ``localhost``, ``127.0.0.1``, ``::1``
                         (SANs), signed by the CA, valid for 825 days
``good-chain.pem``       ``good.pem`` followed by ``ca.pem``
``wrong-host.pem/.key``  leaf for ``wrong.example`` only, signed by the CA
``expired.pem/.key``     leaf for localhost & co, signed by the CA, valid
                         2020-01-01 .. 2020-01-02 only
``not-yet-valid.pem/.key`` same, valid from 2099-01-01
``self-signed.pem/.key`` self-signed leaf for localhost & co (not a CA)
``untrusted-ca.pem/.key`` a second CA that no test trusts
``untrusted.pem/.key``   leaf for localhost & co signed by that second CA
                         (the "unknown CA" case)
``client-ca.pem/.key``   the CA that the upstream's ``--client-ca`` trusts
``client.pem/.key``      client certificate, CN ``xhrpc-client``, signed by
                         the client CA (extendedKeyUsage clientAuth)
``client-enc.key``       the same key, encrypted (PKCS#8, AES-256-CBC),
                         password ``secret``
``client.p12``           PKCS#12 of client.pem + client.key, password
                         ``secret``
``client-bundle.pem``    client.pem followed by client.key (one-file form)
``rogue-client.pem/.key`` client certificate, CN ``xhrpc-rogue``, signed by
                         the untrusted CA (refused by ``--client-ca``)
``good.pin``             ``sha256//BASE64`` of good.pem's public key
                         (libcurl's CURLOPT_PINNEDPUBLICKEY format), no newline;
                         the string is the pin: libcurl takes a *file name*
                         there as a public key file, not as a pin list
``good-pubkey.pem/.der`` good.pem's public key, the file form of the pin
``bad.pin``              the same for an unrelated key (a pin that never
                         matches)
=======================  ===================================================

The dictionary maps names to absolute paths: ``ca``, ``ca_key``, ``good_cert``,
``good_key``, ``good_chain``, ``wrong_host_cert``, ``wrong_host_key``,
``expired_cert``, ``expired_key``, ``not_yet_valid_cert``,
``not_yet_valid_key``, ``self_signed_cert``, ``self_signed_key``,
``untrusted_ca``, ``untrusted_ca_key``, ``untrusted_cert``, ``untrusted_key``,
``client_ca``, ``client_ca_key``, ``client_cert``, ``client_key``,
``client_enc_key``, ``client_p12``, ``client_bundle``, ``rogue_client_cert``,
``rogue_client_key``, ``good_pin``, ``bad_pin``, ``good_pubkey_pem``,
``good_pubkey_der``; plus the values
``good_pin_value``, ``bad_pin_value`` (the pin strings) and
``client_key_password`` (``secret``).
"""

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

KEY_PASSWORD = "secret"
LOCAL_SANS = "DNS:localhost,IP:127.0.0.1,IP:::1"
OPENSSL_TIMEOUT = 30  # seconds for any one openssl command (each takes ~10 ms)
LOCK_TIMEOUT = 60     # seconds to wait for another process making files in OUTDIR

# Extension sections used with "openssl x509 -req -extfile" and "openssl ca".
EXTENSIONS = """\
[ server_local ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1

[ server_wrong ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:wrong.example

[ client ]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""

# A minimal "openssl ca" configuration: the only openssl 3.0 command that sets
# arbitrary validity dates (-startdate/-enddate); x509 -not_before arrived in 3.4.
CA_CONFIG = """\
[ ca ]
default_ca = testca

[ testca ]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/newcerts
serial = $dir/serial
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
email_in_dn = no

[ anything ]
organizationName = optional
commonName = supplied

{extensions}
"""


class OpenSSLError(RuntimeError):
    pass


def _openssl(*args, cwd=None, stdin=None):
    cmd = ["openssl"] + list(args)
    try:
        p = subprocess.run(cmd, cwd=cwd, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=OPENSSL_TIMEOUT)
    except FileNotFoundError:
        raise OpenSSLError("the openssl command line is missing (Debian package 'openssl')")
    if p.returncode != 0:
        raise OpenSSLError("%s failed (%d): %s" % (" ".join(cmd), p.returncode,
                                                   p.stderr.decode("utf-8", "replace").strip()))
    return p.stdout


def _key(path):
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-pkeyopt", "ec_param_enc:named_curve", "-out", path)
    os.chmod(path, 0o600)


def _serial():
    return "0x" + secrets.token_hex(16).lstrip("0").rjust(1, "1")


def _ca(work, name, cn):
    key, cert = os.path.join(work, name + ".key"), os.path.join(work, name + ".pem")
    _key(key)
    _openssl("req", "-new", "-x509", "-key", key, "-out", cert, "-sha256", "-days", "3650",
             "-set_serial", _serial(), "-subj", "/O=xhrpc tests/CN=" + cn,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash")
    return cert, key


def _csr(work, name, cn):
    key, csr = os.path.join(work, name + ".key"), os.path.join(work, name + ".csr")
    _key(key)
    _openssl("req", "-new", "-key", key, "-out", csr, "-subj", "/O=xhrpc tests/CN=" + cn)
    return key, csr


def _leaf(work, name, cn, ca, ca_key, section, days=825):
    key, csr = _csr(work, name, cn)
    cert = os.path.join(work, name + ".pem")
    _openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-out", cert,
             "-sha256", "-days", str(days), "-set_serial", _serial(),
             "-extfile", os.path.join(work, "extensions.cnf"), "-extensions", section)
    os.unlink(csr)
    return cert, key


def _leaf_dated(work, name, cn, ca, ca_key, section, start, end):
    """A leaf with explicit validity dates (YYYYMMDDHHMMSSZ), via ``openssl ca``."""
    key, csr = _csr(work, name, cn)
    cert = os.path.join(work, name + ".pem")
    db = tempfile.mkdtemp(prefix="ca-", dir=work)
    os.mkdir(os.path.join(db, "newcerts"))
    open(os.path.join(db, "index.txt"), "w").close()
    with open(os.path.join(db, "serial"), "w") as f:
        f.write(secrets.token_hex(16).upper() + "\n")
    conf = os.path.join(db, "ca.cnf")
    with open(conf, "w") as f:
        f.write(CA_CONFIG.format(dir=db, extensions=EXTENSIONS))
    _openssl("ca", "-batch", "-notext", "-config", conf, "-cert", ca, "-keyfile", ca_key,
             "-in", csr, "-out", cert, "-extensions", section,
             "-startdate", start, "-enddate", end)
    shutil.rmtree(db, ignore_errors=True)
    os.unlink(csr)
    return cert, key


def pin_of(cert_or_key_path):
    """libcurl's pinned public key string ``sha256//BASE64`` for a cert or key file."""
    with open(cert_or_key_path, "rb") as f:
        is_cert = b"CERTIFICATE-----" in f.read()
    if is_cert:
        pem = _openssl("x509", "-in", cert_or_key_path, "-noout", "-pubkey")
    else:
        pem = _openssl("pkey", "-in", cert_or_key_path, "-pubout")
    der = _openssl("pkey", "-pubin", "-outform", "DER", stdin=pem)
    return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


def _concat(out, *parts):
    with open(out, "wb") as f:
        for p in parts:
            with open(p, "rb") as src:
                f.write(src.read())


@contextlib.contextmanager
def _locked(outdir):
    fd = os.open(os.path.join(outdir, ".certs.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OpenSSLError("%s is locked by another certs.py" % outdir)
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def make_all(outdir):
    """Create every file in ``outdir`` (created if missing); return {name: path}."""
    outdir = os.path.abspath(outdir)
    os.makedirs(outdir, exist_ok=True)
    with _locked(outdir):
        return _make_all(outdir)


def _make_all(outdir):
    work = tempfile.mkdtemp(prefix=".certs-", dir=outdir)
    try:
        with open(os.path.join(work, "extensions.cnf"), "w") as f:
            f.write(EXTENSIONS)
        ca, ca_key = _ca(work, "ca", "xhrpc test CA")
        _leaf(work, "good", "localhost", ca, ca_key, "server_local")
        _concat(os.path.join(work, "good-chain.pem"), os.path.join(work, "good.pem"), ca)
        _leaf(work, "wrong-host", "wrong.example", ca, ca_key, "server_wrong")
        _leaf_dated(work, "expired", "localhost", ca, ca_key, "server_local",
                    "20200101000000Z", "20200102000000Z")
        _leaf_dated(work, "not-yet-valid", "localhost", ca, ca_key, "server_local",
                    "20990101000000Z", "20991231000000Z")
        # Self-signed leaf: not a CA, SANs for the local names.
        ss_key = os.path.join(work, "self-signed.key")
        _key(ss_key)
        _openssl("req", "-new", "-x509", "-key", ss_key, "-out",
                 os.path.join(work, "self-signed.pem"), "-sha256", "-days", "825",
                 "-set_serial", _serial(), "-subj", "/O=xhrpc tests/CN=localhost",
                 "-addext", "basicConstraints=critical,CA:FALSE",
                 "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
                 "-addext", "extendedKeyUsage=serverAuth",
                 "-addext", "subjectAltName=" + LOCAL_SANS)
        uca, uca_key = _ca(work, "untrusted-ca", "xhrpc untrusted CA")
        _leaf(work, "untrusted", "localhost", uca, uca_key, "server_local")
        cca, cca_key = _ca(work, "client-ca", "xhrpc client CA")
        client, client_key = _leaf(work, "client", "xhrpc-client", cca, cca_key, "client")
        _openssl("pkey", "-in", client_key, "-out", os.path.join(work, "client-enc.key"),
                 "-aes-256-cbc", "-passout", "pass:" + KEY_PASSWORD)
        _openssl("pkcs12", "-export", "-in", client, "-inkey", client_key,
                 "-out", os.path.join(work, "client.p12"), "-name", "xhrpc-client",
                 "-passout", "pass:" + KEY_PASSWORD)
        _concat(os.path.join(work, "client-bundle.pem"), client, client_key)
        _leaf(work, "rogue-client", "xhrpc-rogue", uca, uca_key, "client")
        good_pin = pin_of(os.path.join(work, "good.pem"))
        _openssl("pkey", "-in", os.path.join(work, "good.key"), "-pubout",
                 "-out", os.path.join(work, "good-pubkey.pem"))
        _openssl("pkey", "-in", os.path.join(work, "good.key"), "-pubout", "-outform", "DER",
                 "-out", os.path.join(work, "good-pubkey.der"))
        bad_pin = pin_of(os.path.join(work, "untrusted.key"))
        assert good_pin != bad_pin
        for name, value in (("good.pin", good_pin), ("bad.pin", bad_pin)):
            with open(os.path.join(work, name), "w") as f:
                f.write(value)

        names = {
            "ca": "ca.pem", "ca_key": "ca.key",
            "good_cert": "good.pem", "good_key": "good.key", "good_chain": "good-chain.pem",
            "wrong_host_cert": "wrong-host.pem", "wrong_host_key": "wrong-host.key",
            "expired_cert": "expired.pem", "expired_key": "expired.key",
            "not_yet_valid_cert": "not-yet-valid.pem", "not_yet_valid_key": "not-yet-valid.key",
            "self_signed_cert": "self-signed.pem", "self_signed_key": "self-signed.key",
            "untrusted_ca": "untrusted-ca.pem", "untrusted_ca_key": "untrusted-ca.key",
            "untrusted_cert": "untrusted.pem", "untrusted_key": "untrusted.key",
            "client_ca": "client-ca.pem", "client_ca_key": "client-ca.key",
            "client_cert": "client.pem", "client_key": "client.key",
            "client_enc_key": "client-enc.key", "client_p12": "client.p12",
            "client_bundle": "client-bundle.pem",
            "rogue_client_cert": "rogue-client.pem", "rogue_client_key": "rogue-client.key",
            "good_pin": "good.pin", "bad_pin": "bad.pin",
            "good_pubkey_pem": "good-pubkey.pem", "good_pubkey_der": "good-pubkey.der",
        }
        paths = {}
        for key, fname in names.items():
            src = os.path.join(work, fname)
            if fname.endswith((".key", ".p12")):
                os.chmod(src, 0o600)
            else:
                os.chmod(src, 0o644)
            dst = os.path.join(outdir, fname)
            os.replace(src, dst)
            paths[key] = dst
        paths["good_pin_value"] = good_pin
        paths["bad_pin_value"] = bad_pin
        paths["client_key_password"] = KEY_PASSWORD
        return paths
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.stderr.write("usage: python3 Tests/Fixtures/certs.py OUTDIR\n")
        return 2
    try:
        paths = make_all(argv[0])
    except OpenSSLError as e:
        sys.stderr.write("certs.py: %s\n" % e)
        return 1
    sys.stdout.write(json.dumps(paths, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
