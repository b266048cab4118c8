"""The plural of a kind, as operator-sdk and kubebuilder compute it.

Both take the lower-cased kind through the English inflection rules of the Go library
`flect`: a word table (irregular plurals, words whose plural is the same, words already
plural), then suffix rules in priority order, then "ends in s: already plural", else add
`s`. `Sites` stays `sites`, `Memcached` becomes `memcacheds`, `Policy` `policies`,
`Index` `indices`. The tables are data; the resulting names must match operator-sdk's so a
project moves between the two tools unchanged.
"""

from __future__ import annotations

__all__ = ["plural"]

# (singular, plural, another accepted plural, flags): "u" means the plural does not lead
# back to this singular; "x" means the word is matched whole only, never as a suffix.
_WORDS: tuple[tuple[str, str, str, str], ...] = (
    ("aircraft", "aircraft", "", ""),
    ("beef", "beef", "beefs", ""),
    ("bison", "bison", "", ""),
    ("blues", "blues", "", "u"),
    ("chassis", "chassis", "", ""),
    ("deer", "deer", "", ""),
    ("fish", "fish", "fishes", ""),
    ("moose", "moose", "", ""),
    ("police", "police", "", ""),
    ("salmon", "salmon", "salmons", ""),
    ("series", "series", "", ""),
    ("sheep", "sheep", "", ""),
    ("shrimp", "shrimp", "shrimps", ""),
    ("species", "species", "", ""),
    ("swine", "swine", "swines", ""),
    ("trout", "trout", "trouts", ""),
    ("tuna", "tuna", "tunas", ""),
    ("you", "you", "", ""),
    ("child", "children", "", ""),
    ("ox", "oxen", "", "x"),
    ("foot", "feet", "", ""),
    ("goose", "geese", "", ""),
    ("man", "men", "", ""),
    ("human", "humans", "", ""),
    ("louse", "lice", "", "x"),
    ("mouse", "mice", "", ""),
    ("tooth", "teeth", "", ""),
    ("woman", "women", "", ""),
    ("die", "dice", "", "x"),
    ("person", "people", "", ""),
    ("adieu", "adieux", "adieus", ""),
    ("fabliau", "fabliaux", "", ""),
    ("bureau", "bureaus", "bureaux", ""),
    ("criterion", "criteria", "", ""),
    ("ganglion", "ganglia", "ganglions", ""),
    ("lexicon", "lexica", "lexicons", ""),
    ("mitochondrion", "mitochondria", "mitochondrions", ""),
    ("noumenon", "noumena", "", ""),
    ("phenomenon", "phenomena", "", ""),
    ("taxon", "taxa", "", ""),
    ("media", "media", "", ""),
    ("medium", "media", "mediums", "u"),
    ("stadium", "stadiums", "stadia", ""),
    ("aquarium", "aquaria", "aquariums", ""),
    ("auditorium", "auditoria", "auditoriums", ""),
    ("symposium", "symposia", "symposiums", ""),
    ("curriculum", "curriculums", "curricula", ""),
    ("quota", "quotas", "", ""),
    ("alumnus", "alumni", "alumnuses", ""),
    ("bacillus", "bacilli", "", ""),
    ("cactus", "cacti", "cactuses", ""),
    ("coccus", "cocci", "", ""),
    ("focus", "foci", "focuses", ""),
    ("locus", "loci", "locuses", ""),
    ("nucleus", "nuclei", "nucleuses", ""),
    ("octopus", "octupuses", "octopi", ""),
    ("radius", "radii", "radiuses", ""),
    ("syllabus", "syllabi", "", ""),
    ("corpus", "corpora", "corpuses", ""),
    ("genus", "genera", "", ""),
    ("alumna", "alumnae", "", ""),
    ("vertebra", "vertebrae", "", ""),
    ("differentia", "differentiae", "", ""),
    ("minutia", "minutiae", "", ""),
    ("vita", "vitae", "", ""),
    ("larva", "larvae", "", ""),
    ("postcava", "postcavae", "", ""),
    ("praecava", "praecavae", "", ""),
    ("uva", "uvae", "", ""),
    ("apex", "apices", "apexes", ""),
    ("codex", "codices", "codexes", ""),
    ("index", "indices", "indexes", ""),
    ("latex", "latices", "latexes", ""),
    ("vertex", "vertices", "vertexes", ""),
    ("vortex", "vortices", "vortexes", ""),
    ("appendix", "appendices", "appendixes", ""),
    ("radix", "radices", "radixes", ""),
    ("helix", "helices", "helixes", ""),
    ("axis", "axes", "", "x"),
    ("crisis", "crises", "", ""),
    ("ellipsis", "ellipses", "", "u"),
    ("genesis", "geneses", "", ""),
    ("oasis", "oases", "", ""),
    ("thesis", "theses", "", ""),
    ("testis", "testes", "", ""),
    ("base", "bases", "", ""),
    ("basis", "bases", "", "u"),
    ("alias", "aliases", "", "x"),
    ("vedalia", "vedalias", "", ""),
    ("use", "uses", "", "x"),
    ("abuse", "abuses", "", ""),
    ("cause", "causes", "", ""),
    ("clause", "clauses", "", ""),
    ("cruse", "cruses", "", ""),
    ("excuse", "excuses", "", ""),
    ("fuse", "fuses", "", ""),
    ("house", "houses", "", ""),
    ("misuse", "misuses", "", ""),
    ("muse", "muses", "", ""),
    ("pause", "pauses", "", ""),
    ("ache", "aches", "", ""),
    ("topaz", "topazes", "", ""),
    ("buffalo", "buffaloes", "buffalos", ""),
    ("potato", "potatoes", "", ""),
    ("tomato", "tomatoes", "", ""),
    ("equipment", "equipment", "", ""),
    ("information", "information", "", ""),
    ("jeans", "jeans", "", ""),
    ("money", "money", "", ""),
    ("news", "news", "", ""),
    ("rice", "rice", "", ""),
    ("dwarf", "dwarfs", "dwarves", ""),
    ("hoof", "hoofs", "hooves", ""),
    ("thief", "thieves", "", ""),
    ("chive", "chives", "", ""),
    ("hive", "hives", "", ""),
    ("move", "moves", "", ""),
    ("movie", "movies", "", ""),
    ("cookie", "cookies", "", ""),
    ("pretorium", "pretoriums", "", ""),
    ("agenda", "agendas", "", ""),
    ("formula", "formulas", "formulae", ""),
    ("shoe", "shoes", "", ""),
    ("toe", "toes", "", "x"),
    ("graffiti", "graffiti", "", ""),
    ("ID", "IDs", "", "x"),
)

# (singular suffix, plural suffix), first match wins.
_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("tive", "tives"),
    ("eaf", "eaves"),
    ("oaf", "oaves"),
    ("afe", "aves"),
    ("arf", "arves"),
    ("rfe", "rves"),
    ("rf", "rves"),
    ("lf", "lves"),
    ("fe", "ves"),
    ("ay", "ays"),
    ("ey", "eys"),
    ("oy", "oys"),
    ("quy", "quies"),
    ("uy", "uys"),
    ("y", "ies"),
    ("eau", "eaux"),
    ("bula", "bulae"),
    ("dula", "bulae"),
    ("lula", "bulae"),
    ("nula", "bulae"),
    ("vula", "bulae"),
    ("hedron", "hedra"),
    ("ium", "ia"),
    ("seum", "seums"),
    ("eum", "ea"),
    ("oum", "oa"),
    ("stracum", "straca"),
    ("dum", "da"),
    ("elum", "ela"),
    ("ilum", "ila"),
    ("olum", "ola"),
    ("ulum", "ula"),
    ("llum", "lla"),
    ("ylum", "yla"),
    ("imum", "ima"),
    ("ernum", "erna"),
    ("gnum", "gna"),
    ("brum", "bra"),
    ("crum", "cra"),
    ("terum", "tera"),
    ("serum", "sera"),
    ("trum", "tra"),
    ("antum", "anta"),
    ("atum", "ata"),
    ("entum", "enta"),
    ("etum", "eta"),
    ("itum", "ita"),
    ("otum", "ota"),
    ("utum", "uta"),
    ("ctum", "cta"),
    ("ovum", "ova"),
    ("trix", "trices"),
    ("iasis", "iases"),
    ("mesis", "meses"),
    ("kinesis", "kineses"),
    ("resis", "reses"),
    ("gnosis", "gnoses"),
    ("opsis", "opses"),
    ("ysis", "yses"),
    ("ouse", "ouses"),
    ("lause", "lauses"),
    ("us", "uses"),
    ("ch", "ches"),
    ("io", "ios"),
    ("sh", "shes"),
    ("ss", "sses"),
    ("ez", "ezzes"),
    ("iz", "izzes"),
    ("tz", "tzes"),
    ("zz", "zzes"),
    ("ano", "anos"),
    ("lo", "los"),
    ("to", "tos"),
    ("oo", "oos"),
    ("o", "oes"),
    ("x", "xes"),
    ("S", "Ses"),
)


def _tables() -> tuple[dict[str, str], frozenset[str], tuple[tuple[str, str | None], ...]]:
    to_plural = {singular: plural for singular, plural, _, _ in _WORDS}
    known_plurals = frozenset(
        word
        for _, plural, other, flags in _WORDS
        if "u" not in flags
        for word in (plural, other)
        if word
    )
    # A plural suffix stays as it is (None) and is checked before its singular suffix;
    # words of the table act as suffixes of compound kinds (`WebPerson` → `webpeople`)
    # and take priority over the general suffixes, the later ones first.
    rules: list[tuple[str, str | None]] = []
    for singular, plural in _SUFFIXES:
        rules += [(plural, None), (singular, plural)]
    compounds: list[tuple[str, str | None]] = []
    for singular, plural, _, flags in reversed(_WORDS):
        if "x" not in flags:
            compounds += [(plural, None), (singular, plural)]
    return to_plural, known_plurals, tuple(compounds + rules)


_TO_PLURAL, _KNOWN_PLURALS, _RULES = _tables()


def plural(kind: str) -> str:
    """The resource name (plural) of a kind: `Sites` → `sites`, `Memcached` → `memcacheds`."""
    word = kind.lower()
    if word in _TO_PLURAL:
        return _TO_PLURAL[word]
    if word in _KNOWN_PLURALS:
        return word
    for suffix, replacement in _RULES:
        if word.endswith(suffix):
            return word if replacement is None else word[: len(word) - len(suffix)] + replacement
    if word.endswith("s"):
        return word
    return word + "s"
