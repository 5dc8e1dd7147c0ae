// swift-tools-version:6.0
import PackageDescription

// Layers (DESIGN.md §2): C libraries → CShims → EventLoop / JSON → JSONRPC → HTTPEngine →
// Service → xhrpcd. Each target imports only the layers beneath it.
let package = Package(
    name: "xhrpc",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "xhrpcd", targets: ["xhrpcd"]),
        .executable(name: "xhrpc-bench", targets: ["xhrpc-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .systemLibrary(name: "CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CYajl", pkgConfig: "yajl", providers: [.apt(["libyajl-dev"])]),
        .target(name: "CShims", dependencies: ["CCurl", "CYajl"]),
        .target(name: "EventLoop", dependencies: ["CUV"]),
        .target(name: "JSON", dependencies: ["CYajl", "CShims"]),
        .target(name: "JSONRPC", dependencies: [
            "EventLoop", "JSON", .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "HTTPEngine", dependencies: [
            "EventLoop", "CCurl", "CShims", .product(name: "Logging", package: "swift-log"),
        ]),
        .target(name: "Service", dependencies: [
            "EventLoop", "JSON", "JSONRPC", "HTTPEngine", .product(name: "Logging", package: "swift-log"),
        ], plugins: ["EmbedOpenRPC"]),
        .executableTarget(name: "embed-file", path: "Sources/embed-file"),
        .plugin(name: "EmbedOpenRPC", capability: .buildTool(), dependencies: ["embed-file"]),
        .executableTarget(name: "xhrpcd", dependencies: [
            "Service", "CShims", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "xhrpc-bench", dependencies: [
            "EventLoop", "JSON", "HTTPEngine", "CCurl", "CShims",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], path: "Benchmarks/xhrpc-bench"),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "JSON", "EventLoop"]),
        .testTarget(name: "HTTPEngineTests", dependencies: ["HTTPEngine", "EventLoop"]),
        .testTarget(name: "ServiceTests", dependencies: ["Service", "JSONRPC", "JSON", "EventLoop", "HTTPEngine"]),
    ]
)
