// swift-tools-version:6.1
import PackageDescription

// Layers (docs/internals/ARCHITECTURE.md): C libraries → CShims → EventLoop / JSON → SecureStream (TLS on
// an EventLoop stream) → WebSocket (on either) → JSONRPC → HTTPEngine → Service → xhrpcd; and the client side,
// EventLoop / SecureStream / JSON → XHRPCClient → xhrpc. Each target imports only the
// layers beneath it.

/// The `Fuzz` trait (`make fuzz`: `swift build --traits Fuzz --sanitize address ...`)
/// instruments our own modules for libFuzzer and makes `xhrpc-fuzz` call libFuzzer's
/// driver from its `main` (the Makefile links libclang_rt.fuzzer_no_main). Not
/// `--sanitize fuzzer`: that links libFuzzer's own `main` into every executable of the
/// build, the `embed-file` build tool included, where it clashes with theirs. Without
/// the trait, nothing here changes the build.
let fuzzInstrumented: [SwiftSetting] = [.unsafeFlags(["-sanitize=fuzzer"], .when(traits: ["Fuzz"]))]
let package = Package(
    name: "xhrpc",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "xhrpcd", targets: ["xhrpcd"]),
        // The command-line client, and the Swift client library it is built on.
        .executable(name: "xhrpc", targets: ["xhrpc"]),
        .library(name: "XHRPCClient", targets: ["XHRPCClient"]),
        .executable(name: "xhrpc-bench", targets: ["xhrpc-bench"]),
        // The libFuzzer target (`make fuzz`); the normal build makes it a replayer.
        .executable(name: "xhrpc-fuzz", targets: ["xhrpc-fuzz"]),
    ],
    traits: [
        .trait(name: "Fuzz", description: "Build xhrpc-fuzz as a libFuzzer target (make fuzz)."),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // The operations listener's /metrics: counters recorded through swift-metrics,
        // rendered in the Prometheus text format by swift-prometheus.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(name: "CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYajl", pkgConfig: "yajl", providers: [.apt(["libyajl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // Debian's libwslay-dev ships no pkg-config file: the header is on the default path.
        .systemLibrary(name: "CWslay", providers: [.apt(["libwslay-dev"])]),
        // The content codings the engine decodes itself (HTTPEngine/ContentDecoder.swift):
        // gzip and deflate, br, zstd.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CBrotli", pkgConfig: "libbrotlidec", providers: [.apt(["libbrotli-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .target(name: "CShims", dependencies: ["CCurl", "CYajl", "CZlib"]),
        .target(name: "EventLoop", dependencies: ["CUV"], swiftSettings: fuzzInstrumented),
        .target(name: "SecureStream", dependencies: ["EventLoop", "CUV", "COpenSSL"], swiftSettings: fuzzInstrumented),
        // WebSocket (RFC 6455) on an EventLoop stream or a TLS stream: the upgrade, and
        // wslay's framing driven from the loop; the ws: and wss: listeners' transport.
        .target(name: "WebSocket", dependencies: ["EventLoop", "SecureStream", "CWslay"], swiftSettings: fuzzInstrumented),
        .target(name: "JSON", dependencies: ["CYajl", "CShims"], swiftSettings: fuzzInstrumented),
        .target(name: "JSONRPC", dependencies: [
            "EventLoop", "JSON", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: fuzzInstrumented),
        .target(name: "HTTPEngine", dependencies: [
            "EventLoop", "CCurl", "CShims", "CZlib", "CBrotli", "CZstd", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: fuzzInstrumented),
        // SplitMix64, for the fuzz harness and the randomised tests alike.
        .target(name: "SeededRandom"),
        .target(name: "Service", dependencies: [
            "EventLoop", "SecureStream", "WebSocket", "JSON", "JSONRPC", "HTTPEngine",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ], exclude: ["Operations/Dashboard"], swiftSettings: fuzzInstrumented, plugins: ["EmbedOpenRPC"]),
        .executableTarget(name: "embed-file", path: "Sources/embed-file"),
        .plugin(name: "EmbedOpenRPC", capability: .buildTool(), dependencies: ["embed-file"]),
        // xhrpcd allocates with jemalloc (Debian's libjemalloc2), which serves the many
        // small, short-lived allocations of a request in less CPU than glibc's malloc
        // (docs/internals/benchmark-history.md, "Allocator"). Only the server: the benchmark's direct
        // libcurl client, its peer, keeps glibc's.
        .executableTarget(name: "xhrpcd", dependencies: [
            "Service", "CShims", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ], linkerSettings: [
            .linkedLibrary("jemalloc"),
            // GnuTLSImplicitInit.swift's answer must be visible to GnuTLS, a library that
            // xhrpcd does not link directly.
            .unsafeFlags(["-Xlinker", "--export-dynamic-symbol=_gnutls_global_init_skip"]),
        ]),
        // The client: a connection on a loop thread of its own (the same Stream and
        // TLSStream the server runs on), async/await on top.
        .target(name: "XHRPCClient", dependencies: ["EventLoop", "SecureStream", "JSON"]),
        .executableTarget(name: "xhrpc", dependencies: [
            "XHRPCClient", "JSON", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // examples/swift: the Swift client's example, run by `make examples`.
        .executableTarget(name: "xhrpc-example", dependencies: ["XHRPCClient"], path: "examples/swift"),
        .executableTarget(name: "xhrpc-bench", dependencies: [
            "EventLoop", "JSON", "HTTPEngine", "CCurl", "CShims",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], path: "Benchmarks/xhrpc-bench"),
        .executableTarget(name: "xhrpc-fuzz", dependencies: [
            "Service", "EventLoop", "JSON", "HTTPEngine", .product(name: "Logging", package: "swift-log"),
            "CShims", "CUV", "SeededRandom",
        ], swiftSettings: fuzzInstrumented + [.define("XHRPC_FUZZ", .when(traits: ["Fuzz"]))]),
        // Helpers more than one test target needs (test targets cannot import each other).
        // Plain Swift that throws or returns, no Swift Testing: the assertions stay in the
        // tests. Part of no product.
        .target(name: "TestSupport", dependencies: ["EventLoop", "CUV"], path: "Tests/TestSupport"),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "SeededRandom"]),
        // The fuzz harness's own rules (origin mode's records, policy and pacing).
        .testTarget(name: "FuzzHarnessTests", dependencies: ["xhrpc-fuzz", "EventLoop", "HTTPEngine"]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "TestSupport"]),
        .testTarget(name: "SecureStreamTests", dependencies: ["SecureStream", "EventLoop", "TestSupport"]),
        .testTarget(name: "WebSocketTests", dependencies: ["WebSocket"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "JSON", "EventLoop"]),
        .testTarget(name: "HTTPEngineTests", dependencies: ["HTTPEngine", "EventLoop", "TestSupport", "SeededRandom"]),
        .testTarget(name: "ServiceTests", dependencies: [
            "Service", "WebSocket", "JSONRPC", "JSON", "EventLoop", "HTTPEngine", "TestSupport", "XHRPCClient",
        ]),
    ]
)
