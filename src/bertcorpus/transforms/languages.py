"""Language tags: every document carries one (BCP 47: `en`, `ja`, `zh-Hans`; `und` when unknown).

A tag is a primary language subtag, then optionally a script (four letters, `Hans`) and a region (two letters or
three digits, `TW`). Primary subtags are checked against the ISO 639-1 codes and the ISO 639-3 codes of the
Wikipedias, so that a typo is caught with a suggestion instead of becoming a language of its own. A wiki dump's
language comes from its own header: MediaWiki's content language (`xml:lang`), else the database name (`zhwiki`).
"""

from __future__ import annotations

import difflib
import re

UNDETERMINED = "und"

# ISO 639-1: code and English name.
_ISO_639_1 = (
    "aa Afar|ab Abkhaz|ae Avestan|af Afrikaans|ak Akan|am Amharic|an Aragonese|ar Arabic|as Assamese|av Avaric|"
    "ay Aymara|az Azerbaijani|ba Bashkir|be Belarusian|bg Bulgarian|bi Bislama|bm Bambara|bn Bengali|bo Tibetan|"
    "br Breton|bs Bosnian|ca Catalan|ce Chechen|ch Chamorro|co Corsican|cr Cree|cs Czech|cu Church Slavonic|"
    "cv Chuvash|cy Welsh|da Danish|de German|dv Divehi|dz Dzongkha|ee Ewe|el Greek|en English|eo Esperanto|"
    "es Spanish|et Estonian|eu Basque|fa Persian|ff Fula|fi Finnish|fj Fijian|fo Faroese|fr French|"
    "fy West Frisian|ga Irish|gd Scottish Gaelic|gl Galician|gn Guarani|gu Gujarati|gv Manx|ha Hausa|he Hebrew|"
    "hi Hindi|ho Hiri Motu|hr Croatian|ht Haitian Creole|hu Hungarian|hy Armenian|hz Herero|ia Interlingua|"
    "id Indonesian|ie Interlingue|ig Igbo|ii Nuosu|ik Inupiaq|io Ido|is Icelandic|it Italian|iu Inuktitut|"
    "ja Japanese|jv Javanese|ka Georgian|kg Kongo|ki Kikuyu|kj Kwanyama|kk Kazakh|kl Greenlandic|kn Kannada|"
    "km Khmer|ko Korean|kr Kanuri|ks Kashmiri|ku Kurdish|kv Komi|kw Cornish|ky Kyrgyz|la Latin|lb Luxembourgish|"
    "lg Ganda|li Limburgish|ln Lingala|lo Lao|lt Lithuanian|lu Luba-Katanga|lv Latvian|mg Malagasy|mh Marshallese|"
    "mi Maori|mk Macedonian|ml Malayalam|mn Mongolian|mr Marathi|ms Malay|mt Maltese|my Burmese|na Nauru|"
    "nb Norwegian Bokmal|nd North Ndebele|ne Nepali|ng Ndonga|nl Dutch|nn Norwegian Nynorsk|no Norwegian|"
    "nr South Ndebele|nv Navajo|ny Chichewa|oc Occitan|oj Ojibwe|om Oromo|or Odia|os Ossetian|pa Punjabi|pi Pali|"
    "pl Polish|ps Pashto|pt Portuguese|qu Quechua|rm Romansh|rn Kirundi|ro Romanian|ru Russian|rw Kinyarwanda|"
    "sa Sanskrit|sc Sardinian|sd Sindhi|se Northern Sami|sg Sango|si Sinhala|sk Slovak|sl Slovenian|sm Samoan|"
    "sn Shona|so Somali|sq Albanian|sr Serbian|ss Swati|st Southern Sotho|su Sundanese|sv Swedish|sw Swahili|"
    "ta Tamil|te Telugu|tg Tajik|th Thai|ti Tigrinya|tk Turkmen|tl Tagalog|tn Tswana|to Tongan|tr Turkish|"
    "ts Tsonga|tt Tatar|tw Twi|ty Tahitian|ug Uyghur|uk Ukrainian|ur Urdu|uz Uzbek|ve Venda|vi Vietnamese|"
    "vo Volapuk|wa Walloon|wo Wolof|xh Xhosa|yi Yiddish|yo Yoruba|za Zhuang|zh Chinese|zu Zulu"
)
# ISO 639-3 codes of languages with a Wikipedia (and a few more in common corpora) that have no 639-1 code.
_ISO_639_3 = (
    "ace ady alt ami ang anp arc ary arz ast atj avk awa azb ban bar bbc bcl bdr bew bjn blk bpy bug bxr cbk cdo "
    "ceb chr chy ckb crh csb diq dsb dtp dty egl eml ext fat frp frr fur gag gan gcr glk gom gor got gpe grc gsw guc "
    "gur guw hak haw hbs hif hsb hyw iba ilo inh jam jbo kaa kab kbd kbp kcg kge koi krc ksh kus lad lbe lez lfn lij "
    "lld lmo ltg lzh mad mai mdf mhr min mni mnw mos mrj mwl myv mzn nah nan nap nds new nia nov nqo nrf nso olo pag "
    "pam pap pcd pcm pdc pfl pih pms pnb pnt pwn rmy rue rup sah sat scn sco sgs shi shn skr smn srn stq sun szl szy "
    "tay tcy tdd tet tly tpi trv tum tyv udm vec vep vls vro war wuu xal xmf yue zea zgh"
)
LANGUAGE_NAMES = dict(entry.split(" ", 1) for entry in _ISO_639_1.split("|"))
KNOWN_LANGUAGES = frozenset(LANGUAGE_NAMES) | frozenset(_ISO_639_3.split()) | {UNDETERMINED, "mul"}

# Wikipedia database names whose language code is not the part before "wiki" (MediaWiki codes → BCP 47).
_WIKI_CODES = {
    "simple": "en",
    "zh_classical": "lzh",
    "zh_min_nan": "nan",
    "zh_yue": "yue",
    "be_x_old": "be-tarask",
    "als": "gsw",
    "bat_smg": "sgs",
    "fiu_vro": "vro",
    "roa_rup": "rup",
    "roa_tara": "nap",
    "map_bms": "jv",
    "cbk_zam": "cbk",
    "nds_nl": "nds-NL",
    "no": "nb",
    "sh": "hbs",
}
# Country codes and retired language codes that are often written for a language (jp for Japanese): the code they
# stand for, suggested before any look-alike.
_MISTAKEN_CODES = {
    "jp": "ja",
    "cn": "zh",
    "ua": "uk",
    "gr": "el",
    "cz": "cs",
    "dk": "da",
    "vn": "vi",
    "us": "en",
    "gb": "en",
    "il": "he",
    "iw": "he",
    "in": "id",
    "ji": "yi",
    "jw": "jv",
    "mo": "ro",
    "rs": "sr",
    "al": "sq",
    "ir": "fa",
    "pk": "ur",
    "ge": "ka",
    "by": "be",
    "kz": "kk",
}
_WIKI_SUFFIX = re.compile(r"(wiki|wiktionary|wikibooks|wikinews|wikiquote|wikisource|wikiversity|wikivoyage)$")
_TAG = re.compile(r"^([A-Za-z]{2,3})(?:-([A-Za-z]{4}))?(?:-([A-Za-z]{2}|\d{3}))?((?:-[A-Za-z0-9]{4,8})*)$")


class LanguageTagError(ValueError):
    """A language tag that is no BCP 47 tag of a known language; the message suggests the closest."""


def normalize_tag(tag: str) -> str:
    """A tag in BCP 47's canonical case (`zh-hant-tw` → `zh-Hant-TW`), its primary language checked.

    Raises LanguageTagError, naming the closest known code, for anything else."""
    found = _TAG.match(tag.strip().replace("_", "-"))
    if not found or found.group(1).lower() not in KNOWN_LANGUAGES:
        raise LanguageTagError(f"unknown language code {tag!r}{_suggestion(tag)}")
    language, script, region, variants = found.groups()
    parts = [language.lower()]
    if script:
        parts.append(script.title())
    if region:
        parts.append(region.upper())
    return "-".join(parts) + variants.lower()


def _suggestion(tag: str) -> str:
    """'; did you mean xx (Name)?' for the closest known code or language name, or nothing."""
    word = tag.strip().lower()
    by_name = {name.lower(): code for code, name in LANGUAGE_NAMES.items()}
    if word in by_name:
        code = by_name[word]
        return f"; did you mean {code} ({LANGUAGE_NAMES[code]})?"
    primary = re.split(r"[-_]", word)[0]
    if primary in _MISTAKEN_CODES:
        code = _MISTAKEN_CODES[primary]
        return f"; did you mean {code} ({LANGUAGE_NAMES[code]})?"
    close = difflib.get_close_matches(primary, sorted(KNOWN_LANGUAGES), n=1, cutoff=0.5) or difflib.get_close_matches(
        word, sorted(by_name), n=1, cutoff=0.6
    )
    if not close:
        return ""
    code = by_name.get(close[0], close[0])
    name = LANGUAGE_NAMES.get(code)
    return f"; did you mean {code}{f' ({name})' if name else ''}?"


def primary_language(tag: str) -> str:
    """The language without script or region: `zh-Hant-TW` → `zh`."""
    return tag.split("-", 1)[0]


def wiki_language(content_language: str | None, dbname: str | None) -> str:
    """A dump's language: its content language (siteinfo's xml:lang, a MediaWiki code), else its database name's
    code (`viwiki` → `vi`), else `und`. MediaWiki codes that are not BCP 47 are mapped (`simple` → `en`)."""
    candidates = []
    if content_language:
        candidates.append(content_language.strip().lower().replace("-", "_"))
    if dbname and (found := _WIKI_SUFFIX.search(dbname)):
        candidates.append(dbname[: found.start()])
    for code in candidates:
        code = _WIKI_CODES.get(code, code.replace("_", "-"))
        try:
            return normalize_tag(code)
        except LanguageTagError:
            continue
    return UNDETERMINED
