# bash completion for chunkinv. Subcommands, options and most values come
# from the binary being completed (its --help, --list-paths, --list-metrics,
# --list-families, --list-methods), so they never fall behind it.
#   source scripts/completion/chunkinv.bash      (or install it: cmake --install)

_chunkinv_words() {  # the binary's own words for a value of option $2 of subcommand $1
  local bin=$1 cmd=$2 opt=$3
  case $opt in
    --paths) "$bin" run --list-paths 2>/dev/null | sed 's/[: ].*//'; echo all ;;
    --metrics) "$bin" run --list-metrics 2>/dev/null | sed -n 's/^\([a-z_0-9]*\) (.*/\1/p' ;;
    --format|-f)
      case $cmd in
        run|table) echo md latex csv ;;
        check) echo md json ;;
        *) echo text json ;;
      esac ;;
    --quantiles) echo auto exact sketch ;;
    --pipeline) echo auto host device ;;
    --devices) echo all ;;
    --preset|-p) "$bin" table --help 2>/dev/null | sed -n 's/.*table layout: //p' | tr -d ',' ;;
    --family) "$bin" run --list-families 2>/dev/null | sed -n 's/^\([a-z_]*\):.*/\1/p' ;;
    -a|--axis)
      { "$bin" run --list-families 2>/dev/null | sed -n 's/^    \([a-z_]*\) (default.*/\1=/p'
        printf '%s\n' family= chunk= dim= method=; } | sort -u ;;
  esac
}

_chunkinv() {
  local cur prev bin cmd i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  bin=${COMP_WORDS[0]}
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac
  done
  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$("$bin" --help 2>/dev/null | sed -n '/^Subcommands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')" -- "$cur"))
    fi
    return
  fi
  case $prev in
    --paths|--metrics|--format|-f|--preset|-p|--family|-a|--axis|--quantiles|--pipeline|--devices)
      local words
      words=$(_chunkinv_words "$bin" "$cmd" "$prev")
      if [[ $prev == -a || $prev == --axis ]]; then
        if [[ $cur == family=* ]]; then
          COMPREPLY=($(compgen -P family= -W "$(_chunkinv_words "$bin" "$cmd" --family)" -- "${cur#family=}"))
        elif [[ $cur == method=* ]]; then
          COMPREPLY=($(compgen -P method= -W "$("$bin" run --list-methods 2>/dev/null | sed -n 's/^\([a-z_0-9]*\):.*/\1/p')" -- "${cur#method=}"))
        else
          COMPREPLY=($(compgen -W "$words" -- "$cur"))
          compopt -o nospace 2>/dev/null
        fi
      else
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
      fi
      return ;;
    -o|--output|--inputs|--export|--baseline|-b|--rules|-r|--candidate)
      COMPREPLY=($(compgen -f -- "$cur"))
      return ;;
    --samples|--seed|--batch|--threads|--max-memory|--checkpoint-every|--index|--sample|--count|--repeat|--validate|--cpu-samples|--shard)
      return ;;  # a number
    --until|--until-ci)
      return ;;  # a rule
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$bin" "$cmd" --help 2>/dev/null | grep -oE -- '(^| |,)--?[a-zA-Z][a-z0-9-]*' | sed 's/^[ ,]//' | sort -u)" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))  # configs, reports
  fi
}
complete -o filenames -F _chunkinv chunkinv
