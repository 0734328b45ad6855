# Deterministic allocation-heavy workload for runsel's programs test: dicts, lists,
# strings, big bytes; prints checksums.
import hashlib
import random
import sys


def words(rng, count):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 12))) for _ in range(count)]


def main():
    rng = random.Random(20240601)
    digest = hashlib.sha256()
    out = []

    # Dicts and lists of small objects: counting, grouping, sorting.
    vocabulary = words(rng, 40000)
    counts = {}
    for word in vocabulary:
        counts[word] = counts.get(word, 0) + 1
    by_length = {}
    for word in counts:
        by_length.setdefault(len(word), []).append(word)
    for length in sorted(by_length):
        group = sorted(by_length[length])
        out.append("len %d: %d words, first %s, last %s"
                   % (length, len(group), group[0], group[-1]))
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:10]
    out.append("top " + " ".join("%s=%d" % item for item in top))

    # Churn: build and drop many short-lived containers.
    total = 0
    for round_ in range(60):
        table = {i: [str(i * round_), (i, round_), {"k": i}] for i in range(2000)}
        total += sum(len(value[0]) for value in table.values())
        del table
    out.append("churn %d" % total)

    # Strings grown by concatenation and joins.
    pieces = []
    text = ""
    for i in range(20000):
        text += vocabulary[i % len(vocabulary)][:3]
        if len(text) > 1000:
            pieces.append(text)
            text = ""
    joined = "|".join(pieces)
    digest.update(joined.encode())
    out.append("strings %d pieces, %d chars" % (len(pieces), len(joined)))

    # Large and huge buffers: bytes, bytearray growth, slicing.
    blobs = []
    for i in range(24):
        size = (i + 1) * 170000
        blob = bytes((j * 7 + i) & 0xFF for j in range(256)) * (size // 256)
        blobs.append(blob)
        digest.update(blob[::4096])
    grown = bytearray()
    for i in range(3000):
        grown += blobs[i % len(blobs)][: 100 + (i * 37) % 3000]
    digest.update(grown)
    out.append("blobs %d bytes, grown %d bytes" % (sum(map(len, blobs)), len(grown)))
    del blobs

    # Sorting records.
    records = [(rng.random(), rng.randint(0, 1 << 30), vocabulary[i % 5000]) for i in range(60000)]
    records.sort(key=lambda r: (r[2], r[1]))
    digest.update(repr(records[::1000]).encode())
    out.append("records first %s last %s" % (records[0][2], records[-1][2]))

    for line in out:
        digest.update(line.encode())
        print(line)
    print("checksum", digest.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
