import CShims
import Foundation

/// libFuzzer's callback: one input, one connection (`Harness`).
private func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    Harness.shared.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

/// The entry point. In the fuzz build (`make fuzz`, the `Fuzz` trait) it hands the
/// command line to libFuzzer's driver, which takes libFuzzer's usual flags and corpus
/// directories. In the normal build, with no libFuzzer, it replays the input files it
/// is given, once each: a crash input can be rerun and debugged without the fuzz build.
@main
enum FuzzMain {
    static func main() {
        #if XHRPC_FUZZ
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
        #else
        let files = CommandLine.arguments.dropFirst()
        guard !files.isEmpty else {
            print("usage: xhrpc-fuzz INPUT...  (replays inputs; `make fuzz` builds the libFuzzer target)")
            exit(2)
        }
        for path in files {
            guard let data = FileManager.default.contents(atPath: path) else {
                print("cannot read \(path)")
                exit(1)
            }
            data.withUnsafeBytes { _ = fuzzOneInput($0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }
            print("ok \(path)")
        }
        #endif
    }
}
