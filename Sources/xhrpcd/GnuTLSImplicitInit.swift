/// GnuTLS comes into xhrpcd only as a dependency of libcurl's dependencies (librtmp and
/// libldap link it; libcurl itself speaks TLS through OpenSSL), yet by default the
/// library initialises itself when it is loaded: it reads its configuration, loads the
/// p11-kit trust modules and sets up its algorithm tables before `main`, about 1 MiB
/// resident that xhrpcd never uses (`docs/internals/benchmark-history.md`, "Idle memory"). GnuTLS asks
/// the weak symbol `_gnutls_global_init_skip` whether to skip that implicit start-up;
/// this definition answers yes, and the linker exports it so that GnuTLS finds it
/// (`Package.swift`). Code that does use GnuTLS still calls `gnutls_global_init`
/// itself, as librtmp and libldap do, and neither protocol is one xhrpcd lets libcurl
/// use. `test_daemon.py`'s `UnusedLibraries` sees whether GnuTLS started.
@_cdecl("_gnutls_global_init_skip")
public func gnutlsGlobalInitSkip() -> Int32 { 1 }
