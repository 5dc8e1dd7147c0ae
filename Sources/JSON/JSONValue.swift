/// A JSON value as the wire carries it. Integers stay exact: those that fit in 64 bits
/// as `.int`, larger ones as their digits (`.bigInteger`); every other number is a
/// `.double`. Objects keep their members in the order they were written, so what the
/// server writes reads as the code built it.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    /// An integer literal outside Int64's range (`18446744073709551616`, `-1` followed
    /// by twenty zeros), kept as the text it came as: an optional `-` and decimal digits
    /// without leading zeros, as JSON's grammar has them. It is written back exactly so
    /// (a request id past 2^63 is echoed as sent, JSON-RPC 2.0 §5); read as a number
    /// it is the nearest double (`doubleValue`).
    case bigInteger(String)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// An ordered JSON object. Lookups are linear: protocol objects have a handful of
/// members, and order matters more here than asymptotics. A key set twice keeps one
/// member, with the last value, at the first one's place.
public struct JSONObject: Equatable, Sendable, ExpressibleByDictionaryLiteral {
    public private(set) var members: [(key: String, value: JSONValue)]

    public init() { members = [] }

    public init(_ members: [(String, JSONValue)]) {
        // What the code writes (results, literals) has a few keys, all distinct: checked
        // pairwise they are taken as they are, without a search per member.
        if members.count <= 12, Self.distinct(members) {
            self.members = members.map { (key: $0.0, value: $0.1) }
            return
        }
        self.members = []
        self.members.reserveCapacity(members.count)
        for (k, v) in members { self[k] = v }
    }

    /// Whether no two keys are equal. Keys of different lengths differ, which is most
    /// pairs and cheaper to see than comparing them.
    private static func distinct(_ members: [(String, JSONValue)]) -> Bool {
        for i in members.indices {
            for j in members.indices[(i + 1)...] where members[i].0.utf8.count == members[j].0.utf8.count {
                if members[i].0 == members[j].0 { return false }
            }
        }
        return true
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(elements) }

    /// Adopts members whose keys are already distinct, skipping the per-member search of
    /// `init(_:)`. The decoder removes duplicate keys itself first (`YajlValueParser`), so
    /// an object of n members from the wire costs O(n) instead of O(n²): a client cannot
    /// stall the loop with one huge object. Distinct keys are the caller's promise.
    public init(distinctMembers: [(key: String, value: JSONValue)]) { self.members = distinctMembers }

    public var count: Int { members.count }
    public var keys: [String] { members.map(\.key) }

    /// Reading a missing key gives nil; writing nil removes the member.
    public subscript(key: String) -> JSONValue? {
        get {
            // Keys of other lengths are passed over without comparing them (a call's
            // envelope is looked up four times, among keys of 2 to 7 bytes).
            // Read in place: a loop over the array's elements copied each member (a
            // retain and a release of its key and value) before comparing its key.
            let length = key.utf8.count
            return members.withUnsafeBufferPointer { members in
                for i in members.indices where members[i].key.utf8.count == length && members[i].key == key {
                    return members[i].value
                }
                return nil
            }
        }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// Objects are equal when they hold the same keys with equal values, in any order.
    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.count == b.count else { return false }
        for m in a.members where b[m.key] != m.value { return false }
        return true
    }
}

// Beware: as ExpressibleByNilLiteral, `flag ? nil : value` in a `JSONValue?` context
// means `.null`, not `Optional.none`; spell `Optional<JSONValue>.none` there.
extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

extension JSONValue {
    public var isNull: Bool { if case .null = self { return true } else { return false } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }

    /// An exact integer: `.int`, or a `.double` with no fractional part that fits.
    public var int64Value: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    /// Any number as a double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .bigInteger(let digits): return Double(digits)
        case .double(let d): return d
        default: return nil
        }
    }

    /// Member of an object, nil for anything else.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }
}
