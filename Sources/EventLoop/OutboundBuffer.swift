#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A growable run of bytes in C-heap memory, used by `Stream` for the bytes the kernel
/// did not take at once. It is a plain value with a manually managed allocation: the
/// owner calls `release()` exactly once, when no `uv_write` can still be reading it.
///
/// Its address is stable as long as nobody appends: `Stream` only appends to the buffer
/// that is *not* handed to libuv, so a `uv_write` always sees memory that stays put until
/// its callback. `realloc` is used to grow because a buffer that reaches megabytes
/// (a slow reader) can then often grow in place.
struct OutboundBuffer {
    private(set) var base: UnsafeMutableRawPointer?
    private(set) var count = 0
    private var capacity = 0

    /// Buffers up to this size keep their memory when emptied, so a steady stream of
    /// small replies reuses one allocation; bigger ones are freed so that one burst does
    /// not pin megabytes to an idle connection.
    static let retainedCapacity = 64 * 1024

    var isEmpty: Bool { count == 0 }

    /// Copies `bytes` to the end. Aborts only if the C heap is exhausted, which Swift's own
    /// allocations treat the same way.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        let needed = count + bytes.count
        if needed > capacity { grow(toAtLeast: needed) }
        // `grow` guarantees `base` is non-nil from here.
        guard let base else { return }
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count = needed
    }

    private mutating func grow(toAtLeast needed: Int) {
        var newCapacity = Swift.max(capacity * 2, 4096)
        while newCapacity < needed { newCapacity *= 2 }
        guard let grown = realloc(base, newCapacity) else {
            fatalError("OutboundBuffer: out of memory growing to \(newCapacity) bytes")
        }
        base = grown
        capacity = newCapacity
    }

    /// Forgets the contents; keeps the memory only if it is small (see `retainedCapacity`).
    mutating func removeAll() {
        count = 0
        if capacity > OutboundBuffer.retainedCapacity { release() }
    }

    /// Frees the memory. The buffer is empty and usable again afterwards.
    mutating func release() {
        free(base)
        base = nil
        count = 0
        capacity = 0
    }
}
