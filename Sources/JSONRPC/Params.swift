import JSON

/// The parameters of one call, by name, after the dispatcher checked them against the
/// method's declaration (positional parameters are already mapped to names). Accessors
/// turn a wrong type into -32602 with a message that names the parameter.
public struct Params: Sendable {
    public let object: JSONObject

    public init(_ object: JSONObject = [:]) { self.object = object }

    public subscript(name: String) -> JSONValue? {
        guard let v = object[name], !v.isNull else { return nil }
        return v
    }

    public func has(_ name: String) -> Bool { self[name] != nil }

    public func string(_ name: String) throws(RPCError) -> String {
        guard let v = self[name] else { throw .invalidParams("'\(name)' is required") }
        guard let s = v.stringValue else { throw .invalidParams("'\(name)' must be a string") }
        return s
    }

    public func optionalString(_ name: String) throws(RPCError) -> String? {
        guard has(name) else { return nil }
        return try string(name)
    }

    public func bool(_ name: String, default def: Bool) throws(RPCError) -> Bool {
        guard let v = self[name] else { return def }
        guard let b = v.boolValue else { throw .invalidParams("'\(name)' must be true or false") }
        return b
    }

    /// An integer within `range`.
    public func int(_ name: String, in range: ClosedRange<Int64> = Int64.min...Int64.max) throws(RPCError) -> Int64 {
        guard let v = self[name] else { throw .invalidParams("'\(name)' is required") }
        guard let i = v.int64Value else { throw .invalidParams("'\(name)' must be an integer") }
        guard range.contains(i) else {
            throw .invalidParams("'\(name)' must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return i
    }

    public func optionalInt(_ name: String, in range: ClosedRange<Int64> = Int64.min...Int64.max) throws(RPCError) -> Int64? {
        guard has(name) else { return nil }
        return try int(name, in: range)
    }

    /// A duration: finite, not negative, and at most `maxSeconds` (a year), so that it
    /// fits every timer and libcurl option it becomes in milliseconds. (A `timeout` of
    /// 1e300 reached `UInt64(seconds * 1000)` and trapped, ending the process.)
    public func optionalSeconds(_ name: String) throws(RPCError) -> Double? {
        guard let v = self[name] else { return nil }
        guard let d = v.doubleValue, d >= 0, d <= Self.maxSeconds else {
            throw .invalidParams("'\(name)' must be a non-negative number of seconds, at most \(Int(Self.maxSeconds)) (a year)")
        }
        return d
    }

    public static let maxSeconds: Double = 365 * 86_400

    public func optionalObject(_ name: String) throws(RPCError) -> JSONObject? {
        guard let v = self[name] else { return nil }
        guard let o = v.objectValue else { throw .invalidParams("'\(name)' must be an object") }
        return o
    }

    /// One of a fixed set of words, compared case-insensitively.
    public func optionalWord(_ name: String, oneOf words: [String]) throws(RPCError) -> String? {
        guard has(name) else { return nil }
        let s = try string(name)
        guard let w = words.first(where: { $0.lowercased() == s.lowercased() }) else {
            throw .invalidParams("'\(name)' must be one of \(words.joined(separator: ", "))")
        }
        return w
    }
}

