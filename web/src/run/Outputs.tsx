/**
 * The run's outputs (the values its End nodes bound), one row per output: text as it is,
 * anything else as indented JSON. A workflow that ends in End nodes has its result here,
 * not in the answer box (only an LLM an End output binds directly streams there).
 */
import { useT } from '../i18n';

export function RunOutputs({ outputs }: { outputs: Record<string, unknown> | null | undefined }) {
  const t = useT();
  const entries = Object.entries(outputs ?? {});
  if (!entries.length) return null;
  return (
    <div className="run-outputs" data-testid="run-outputs">
      <h5>{t('run.outputs')}</h5>
      <dl>
        {entries.map(([name, value]) => (
          <div key={name} className="run-output" data-testid={`run-output-${name}`}>
            <dt><code>{name}</code></dt>
            <dd>{typeof value === 'string' ? value : <pre className="json">{JSON.stringify(value, null, 2)}</pre>}</dd>
          </div>
        ))}
      </dl>
    </div>
  );
}
